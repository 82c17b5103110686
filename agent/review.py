"""What the user does with the agent's edits after the fact: review, correct, undo. Each arrives as
an Op (ReviewEdit, ReviewFile, CorrectEdit, Undo) and is answered by the event it emits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from agent.changes import Changes
from agent.checkpoint import undo_last
from agent.protocol import CorrectEdit, EditApplied, EditReviewed, Event, ReviewEdit, ReviewFile, TurnUndone, Undo
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

    async def review_file(self, op: ReviewFile) -> EditReviewed:
        """Accept or reject everything the last turn did to a file; rejecting restores it."""
        rel = self.workspace.relative(self.workspace.resolve(op.path))
        changes = {c.path: c for c in self.last_turn_changes()}
        changes.update({c.new_path: c for c in changes.values() if c.new_path})
        change = changes.get(rel)
        edit = self.changes.last_edit(rel)
        if change is None or edit is None:
            raise ReviewError(f"the last turn did not change {rel}; nothing to review.")
        restored = None
        if not op.accepted:
            await asyncio.to_thread(self._restore, change)
            restored = change.before
        return self._reviewed(edit, rel, op.accepted, op.comment, restored)

    async def review_edit(self, op: ReviewEdit) -> EditReviewed:
        """Accept or reject one applied edit; rejecting restores the file as it was before it."""
        edit = next((e for e in self.changes.edits if e.edit_id == op.edit_id), None)
        if edit is None:
            raise ReviewError(f"no edit {op.edit_id!r} in the last turn.")
        restored = None
        if not op.accepted:
            now = self.context.current(edit.new_path or edit.path)
            if now != edit.after:
                raise ReviewError(f"{edit.path} changed after edit {op.edit_id}; review the whole file instead.")
            change = FileChange(edit.path, edit.kind, edit.before, edit.after, new_path=edit.new_path)
            await asyncio.to_thread(self._restore, change)
            restored = edit.before
        return self._reviewed(edit, edit.path, op.accepted, op.comment, restored)

    async def record_correction(self, op: CorrectEdit) -> EditReviewed | None:
        """The user changed lines the agent wrote: record their version as a correction."""
        rel = self.workspace.relative(self.workspace.resolve(op.path))
        edit = self.changes.last_edit(rel)
        if edit is None or op.user_content == edit.after:
            return None
        return self.emit(
            EditReviewed(
                session_id=self.id,
                cause_id=edit.id,
                edit_id=edit.edit_id,
                path=rel,
                decision="corrected",
                user_content=op.user_content,
            )
        )  # type: ignore[return-value]

    async def undo(self, op: Undo) -> TurnUndone:
        """Restore the working tree to the last checkpoint (see agent.checkpoint)."""
        restored = await asyncio.to_thread(undo_last, self.workspace.root)
        for rel in restored:
            self.workspace.overlay.remove(rel)
        return self.emit(TurnUndone(session_id=self.id, cause_id=op.id, paths=restored))  # type: ignore[return-value]

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
