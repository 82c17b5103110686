"""`teachback lsp`, `acp` and `tui`: the doors into a session, each started with its own settings."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Said on stderr when a person starts a door by hand: on a terminal the server would otherwise sit
# silent, waiting for protocol messages that only an editor sends.
TERMINAL_NOTICES = {
    "lsp": (
        "teachback lsp is a language server: your editor starts it and talks to it over stdin/stdout "
        "(LSP), so typed here it only waits. Editor set-up (Neovim, Helix, VS Code, Zed, Emacs): the "
        'README, section "In your editor". To try the agent in this terminal: teachback tui. '
        "Ctrl-C quits."
    ),
    "acp": (
        "teachback acp is an Agent Client Protocol agent: an editor's agent panel (Zed, JetBrains, "
        "Neovim, Emacs) starts it and talks to it over stdin/stdout, so typed here it only waits. "
        'Set-up: the README, section "Agent panels: teachback acp". To try the agent in this '
        "terminal: teachback tui. Ctrl-C quits."
    ),
}


def terminal_notice(door: str) -> None:
    """Tell a person who started `door` on a terminal what it is; say nothing to an editor's pipe."""
    if sys.stdin is not None and sys.stdin.isatty():
        print(TERMINAL_NOTICES[door], file=sys.stderr, flush=True)


def add_lsp_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")


def lsp_main(args: argparse.Namespace) -> int:
    import lsp_server

    if args.tcp is None:  # over TCP stdin is not the protocol's, whatever it is
        terminal_notice("lsp")
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

    terminal_notice("acp")
    return acp_server.main(args.workspace)


def add_tui_arguments(parser: argparse.ArgumentParser) -> None:
    from cli.options import add_settings_options

    parser.add_argument("workspace", nargs="?", type=Path, default=Path.cwd(), help="project root (default: cwd)")
    add_settings_options(parser)


def tui_main(args: argparse.Namespace) -> int:
    import tui
    from cli.options import settings_for

    return tui.main(args.workspace, settings_for(args))
