"""What a tool may use: the workspace, the settings, and the session's record of what it changed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent.changes import Changes
from agent.config import Settings
from agent.workspace import Workspace
from common.diffs import unified_diff

if TYPE_CHECKING:
    from agent.interfaces import CommandTerminal


@dataclass
class ToolContext:
    workspace: Workspace
    settings: Settings
    changes: Changes = field(default_factory=Changes)  # what the session wrote: session_diff, review
    repo_map: Any = None  # agent.repomap.RepoMap when available
    terminal: CommandTerminal | None = None  # where run_command runs (an editor's terminal); None: a pipe

    def current(self, rel: str) -> str | None:
        path = self.workspace.resolve(rel)
        return self.workspace.read_text(path) if self.workspace.exists(path) else None

    def session_diff(self) -> str:
        parts = []
        originals = self.changes.originals
        for rel in sorted(originals):
            parts.append(unified_diff(rel, originals[rel], self.current(rel)))
        return "".join(parts)
