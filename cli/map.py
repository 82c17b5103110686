"""`teachback map`: print the repository map of a workspace."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from agent.repomap.mentions import split_focus
from agent.repomap.repomap import RepoMap

# Below this many files to parse, a scan is quick: no progress bar unless stderr is a terminal.
LARGE_SCAN = 200


def map_main(workspace: Path, focus: list[str], tokens: int) -> int:
    """Print the map of `workspace` to stdout (progress on stderr); the exit status."""
    root = Path(workspace)
    if not root.is_dir():
        sys.stderr.write(f"teachback map: {root} is not a folder; pass the repository's folder.\n")
        return 2
    repo_map = RepoMap(root)
    try:
        paths, mentioned = split_focus(root, focus)
        with _progress_bar() as progress:
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


@contextmanager
def _progress_bar() -> Iterator[Callable[[int, int], None]]:
    """A progress callback that draws a bar on stderr for a long scan (or any, on a terminal).
    rich is imported only when a scan parses something: a map read from the cache needs none."""
    console = bar = task = None

    def update(done: int, total: int) -> None:
        nonlocal console, bar, task
        if bar is None:
            from rich.console import Console
            from rich.progress import Progress

            console = console or Console(stderr=True)
            if total < LARGE_SCAN and not console.is_terminal:
                return
            # On a terminal the bar disappears when done; in a log, its final state stays.
            bar = Progress(console=console, transient=console.is_terminal)
            bar.start()
            task = bar.add_task("Parsing source files", total=total)
        bar.update(task, completed=done, total=total)

    try:
        yield update
    finally:
        if bar is not None:
            bar.stop()
