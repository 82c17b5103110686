"""What a tool may use: the workspace, the settings, and the session's record of what it changed."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from agent.changes import Changes
from agent.config import Settings
from agent.workspace import Workspace


@dataclass
class ToolContext:
    workspace: Workspace
    settings: Settings
    changes: Changes = field(default_factory=Changes)  # what the session wrote: session_diff, review
    repo_map: Any = None  # agent.repomap.RepoMap when available

    def current(self, rel: str) -> str | None:
        path = self.workspace.resolve(rel)
        return self.workspace.read_text(path) if self.workspace.exists(path) else None

    def session_diff(self) -> str:
        parts = []
        originals = self.changes.originals
        for rel in sorted(originals):
            parts.append(unified_diff(rel, originals[rel], self.current(rel)))
        return "".join(parts)


def unified_diff(rel: str, before: str | None, after: str | None, *, new_rel: str | None = None) -> str:
    a = (before or "").splitlines(keepends=True)
    b = (after or "").splitlines(keepends=True)
    diff = difflib.unified_diff(
        a,
        b,
        fromfile="/dev/null" if before is None else f"a/{rel}",
        tofile="/dev/null" if after is None else f"b/{new_rel or rel}",
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff)
