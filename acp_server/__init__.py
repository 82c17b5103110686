"""The Agent Client Protocol agent (`teachback acp`): the agent panels of Zed, JetBrains IDEs, Neovim
plugins and Emacs agent-shell drive teachback sessions over stdio (see acp_server.server)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path


def main(broad_workspaces: Sequence[Path] = ()) -> int:
    from acp_server.server import main as serve

    return serve(broad_workspaces)
