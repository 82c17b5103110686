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
    """The agent reads its settings from the editor's session requests: no options."""


def acp_main(args: argparse.Namespace) -> int:
    import acp_server

    terminal_notice("acp")
    return acp_server.main()


def add_tui_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workspace", nargs="?", type=Path, default=Path.cwd())


def tui_main(args: argparse.Namespace) -> int:
    import tui
    from agent.config import load_settings

    return tui.main(args.workspace, load_settings(args.workspace))
