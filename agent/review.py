"""What the user does with the agent's edits after the fact: review, correct, undo."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from agent.changes import Changes
from agent.checkpoint import undo_last
from agent.protocol import EditApplied, EditReviewed, Event
from agent.tools.context import ToolContext
from agent.workspace import FileChange, Workspace


class ReviewError(Exception):
    pass


class Review:
    """The review side of a session, a part it owns: what the last turn changed (read from the
    session's one record of changes, `context.changes`), accepting or rejecting it, the user's
    corrections, and undo. Verdicts are emitted through the session's `emit`."""

    def __init__(
        self, session_id: str, workspace: Workspace, context: ToolContext, emit: Callable[[Event], Event]
    ) -> None:
        self.id = session_id
        self.workspace = workspace
        self.context = context
        self.emit = emit

    @property
    def changes(self) -> Changes:
        """The session's changes; the current turn's are reset at each turn."""
        return self.context.changes

    def last_turn_changes(self) -> list[FileChange]:
        """Each file the last turn changed: its content at turn start and now."""
        current = {path: self.context.current(path) for path in self.changes.before}
        return self.changes.aggregate(current)

    async def review_file(self, path: str, accepted: bool, comment: str | None = None) -> EditReviewed:
        """Accept or reject everything the last turn did to `path`; rejecting restores it."""
        rel = self.workspace.relative(self.workspace.resolve(path))
        changes = {c.path: c for c in self.last_turn_changes()}
        changes.update({c.new_path: c for c in changes.values() if c.new_path})
        change = changes.get(rel)
        edit = self.changes.last_edit(rel)
        if change is None or edit is None:
            raise ReviewError(f"the last turn did not change {rel}; nothing to review.")
        restored = None
        if not accepted:
            await asyncio.to_thread(self._restore, change)
            restored = change.before
        return self._reviewed(edit, rel, accepted, comment, restored)

    async def review_edit(self, edit_id: str, accepted: bool, comment: str | None = None) -> EditReviewed:
        """Accept or reject one applied edit; rejecting restores the file as it was before it."""
        edit = next((e for e in self.changes.edits if e.edit_id == edit_id), None)
        if edit is None:
            raise ReviewError(f"no edit {edit_id!r} in the last turn.")
        restored = None
        if not accepted:
            now = self.context.current(edit.new_path or edit.path)
            if now != edit.after:
                raise ReviewError(f"{edit.path} changed after edit {edit_id}; review the whole file instead.")
            change = FileChange(edit.path, edit.kind, edit.before, edit.after, new_path=edit.new_path)
            await asyncio.to_thread(self._restore, change)
            restored = edit.before
        return self._reviewed(edit, edit.path, accepted, comment, restored)

    async def record_correction(self, path: str, user_content: str) -> EditReviewed | None:
        """The user changed lines the agent wrote: record their version as a correction."""
        rel = self.workspace.relative(self.workspace.resolve(path))
        edit = self.changes.last_edit(rel)
        if edit is None or user_content == edit.after:
            return None
        return self.emit(
            EditReviewed(
                session_id=self.id,
                cause_id=edit.id,
                edit_id=edit.edit_id,
                path=rel,
                decision="corrected",
                user_content=user_content,
            )
        )  # type: ignore[return-value]

    async def undo(self) -> list[str]:
        """Restore the working tree to the last checkpoint (see agent.checkpoint)."""
        restored = await asyncio.to_thread(undo_last, self.workspace.root)
        for rel in restored:
            self.workspace.overlay.remove(rel)
        return restored

    def _reviewed(
        self, edit: EditApplied, rel: str, accepted: bool, comment: str | None, restored: str | None
    ) -> EditReviewed:
        return self.emit(
            EditReviewed(  # type: ignore[return-value]
                session_id=self.id,
                cause_id=edit.id,
                edit_id=edit.edit_id,
                path=rel,
                decision="accepted" if accepted else "rejected",
                comment=comment,
                user_content=restored,
            )
        )

    def _restore(self, change: FileChange) -> None:
        if change.new_path:
            self.workspace.write(FileChange(change.new_path, "delete", change.after, None))
        if change.before is None:
            self.workspace.write(FileChange(change.path, "delete", change.after, None))
        else:
            self.workspace.write(FileChange(change.path, "modify", change.after, change.before))
