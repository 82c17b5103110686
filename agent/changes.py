"""The session's record of what it changed: per turn (for review and the editor) and overall."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.protocol import EditApplied
from agent.workspace import FileChange


@dataclass
class TurnChanges:
    """Files one turn touched, with their content at the start of the turn, and its moves."""

    before: dict[str, str | None] = field(default_factory=dict)
    moves: dict[str, str] = field(default_factory=dict)  # src -> dst
    edits: list[EditApplied] = field(default_factory=list)

    def note(self, change: FileChange) -> None:
        self.before.setdefault(change.path, change.before)
        if change.kind == "move" and change.new_path:
            self.before.setdefault(change.new_path, None)
            self.moves[change.path] = change.new_path

    def aggregate(self, current: dict[str, str | None]) -> list[FileChange]:
        """One FileChange per file from turn start to `current` (path -> content now, None: gone).

        A file moved and left unchanged elsewhere is reported as one move."""
        reported_moves = {
            src: dst
            for src, dst in self.moves.items()
            if current.get(src) is None and self.before.get(dst) is None and current.get(dst) is not None
        }
        result: list[FileChange] = []
        for path, before in self.before.items():
            if path in reported_moves.values():
                continue  # reported with its source
            after = current.get(path)
            if path in reported_moves:
                dst = reported_moves[path]
                result.append(FileChange(path, "move", before, current[dst], new_path=dst))
            elif before != after:
                kind = "create" if before is None else "delete" if after is None else "modify"
                result.append(FileChange(path, kind, before, after))
        return result

    def last_edit(self, path: str) -> EditApplied | None:
        for edit in reversed(self.edits):
            if path in (edit.path, edit.new_path):
                return edit
        return None
