"""What a tool may use: the workspace, the settings, and the session's record of original contents."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from agent.config import Settings
from agent.workspace import Workspace


@dataclass
class ToolContext:
    workspace: Workspace
    settings: Settings
    # path -> content when the session first touched it (None: did not exist). Feeds session_diff,
    # undo outside git, and review.
    originals: dict[str, str | None] = field(default_factory=dict)
    repo_map: Any = None  # agent.repomap.RepoMap when available

    def current(self, rel: str) -> str | None:
        path = self.workspace.resolve(rel)
        return self.workspace.read_text(path) if self.workspace.exists(path) else None

    def session_diff(self) -> str:
        parts = []
        for rel in sorted(self.originals):
            parts.append(unified_diff(rel, self.originals[rel], self.current(rel)))
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
