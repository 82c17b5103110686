"""`teachback lsp`, `acp` and `tui`: the doors into a session, each started with its own settings."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_lsp_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")


def lsp_main(args: argparse.Namespace) -> int:
    import lsp_server

    return lsp_server.main(args.tcp)


def add_acp_arguments(parser: argparse.ArgumentParser) -> None:
    """The agent reads its settings from the editor's session requests, but for the folders it accepts."""
    parser.add_argument(
        "--workspace",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="accept DIR as a session's folder even though it is the file system's root or your home folder "
        "(refused otherwise); may be repeated",
    )


def acp_main(args: argparse.Namespace) -> int:
    import acp_server

    return acp_server.main(args.workspace)


def add_tui_arguments(parser: argparse.ArgumentParser) -> None:
    from cli.options import add_settings_options

    parser.add_argument("workspace", nargs="?", type=Path, default=Path.cwd(), help="project root (default: cwd)")
    add_settings_options(parser)


def tui_main(args: argparse.Namespace) -> int:
    import tui
    from cli.options import settings_for

    return tui.main(args.workspace, settings_for(args))
