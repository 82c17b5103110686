"""`teachback map`: print the repository map of a workspace."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agent.config import load_settings
from agent.repomap.mentions import split_focus
from agent.repomap.repomap import RepoMap
from common.progress import progress_bar

# Below this many files to parse, a scan is quick: no progress bar unless stderr is a terminal.
LARGE_SCAN = 200


def add_map_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=Path, default=Path.cwd())
    parser.add_argument("--focus", nargs="*", default=[], help="files or identifiers to centre the map on")
    parser.add_argument("--tokens", type=int, default=None, help="token budget (default: repo_map_tokens)")


def map_command(args: argparse.Namespace) -> int:
    tokens = args.tokens if args.tokens is not None else load_settings(args.workspace).repo_map_tokens
    return map_main(args.workspace, args.focus, tokens)


def map_main(workspace: Path, focus: list[str], tokens: int) -> int:
    """Print the map of `workspace` to stdout (progress on stderr); the exit status."""
    root = Path(workspace)
    if not root.is_dir():
        sys.stderr.write(f"teachback map: {root} is not a folder; pass the repository's folder.\n")
        return 2
    repo_map = RepoMap(root)
    try:
        paths, mentioned = split_focus(root, focus)
        with progress_bar("Parsing source files", quiet_below=LARGE_SCAN) as progress:
            text = repo_map.render(tokens=tokens, focus_paths=paths, mentioned=mentioned, progress=progress)
    finally:
        repo_map.close()
    if not text:
        sys.stderr.write(
            f"teachback map: no definitions found under {root} (languages: Python, JavaScript,"
            " TypeScript, Go, Rust, Java, C, C++; ignored and vendored files are skipped).\n"
        )
        return 1
    sys.stdout.write(text)
    return 0
