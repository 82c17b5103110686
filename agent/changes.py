"""The session's one record of what it changed: per turn (for review and the editor) and overall
(for session_diff and the repo map's edited files). The checkpoint keeps its own journal only for
files git cannot snapshot, on disk, so that `teachback undo` works from another process."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.protocol import EditApplied
from agent.workspace import FileChange


@dataclass
class Changes:
    """Files the session touched: `originals` holds each one's content when the session first wrote
    it (None: absent); `before`, `moves` and `edits` are the current turn's, reset by start_turn()."""

    originals: dict[str, str | None] = field(default_factory=dict)
    before: dict[str, str | None] = field(default_factory=dict)
    moves: dict[str, str] = field(default_factory=dict)  # src -> dst
    edits: list[EditApplied] = field(default_factory=list)

    def start_turn(self) -> None:
        self.before, self.moves, self.edits = {}, {}, []

    def note(self, change: FileChange) -> None:
        """A write about to happen (called before the workspace writes it)."""
        for path, before in ((change.path, change.before), (change.new_path, None)):
            if path:
                self.originals.setdefault(path, before)
                self.before.setdefault(path, before)
        if change.kind == "move" and change.new_path:
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
