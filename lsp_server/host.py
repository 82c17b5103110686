"""The agent behind the language server: one session per workspace, one turn at a time.

The session (and with it litellm and the feedback store) is opened lazily, in a worker thread, on
the first request that needs it. Its events fan out to the editor: `teachback/event` notifications
for rich clients, plain lines on `window/logMessage`, the turn's step on `$/progress`, and
`window/showMessageRequest` for approvals. Everything runs on the server's event loop or in worker
threads, so requests keep being served while a turn runs.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types

from agent.protocol import (
    ApprovalDecision,
    ApprovalRequested,
    ApprovalResolved,
    EditApplied,
    Event,
)
from lsp_server import describe
from lsp_server.commands import AskRequest, RequestFailed
from lsp_server.corrections import CorrectionTracker
from lsp_server.documents import Documents, OverlaySink
from lsp_server.editor import Editor
from lsp_server.mapfeed import MapFeeder, Tee
from lsp_server.mirror import mirror_turn, resync_open
from lsp_server.options import ServerOptions
from lsp_server.prompting import user_input

log = logging.getLogger(__name__)

ALLOW, DENY = "Allow", "Deny"


@dataclass
class Turn:
    request_id: Any  # the JSON-RPC id of the teachback.ask request running it
    progress: str | None = None
    step: int = 0
    edits: list[EditApplied] = field(default_factory=list)


class AgentHost:
    def __init__(self, root: Path, options: ServerOptions, documents: Documents, editor: Editor) -> None:
        self.root = root
        self.options = options
        self.documents = documents
        self.editor = editor
        self.session: Any = None  # agent.session.Session, imported lazily
        self.turn: Turn | None = None
        self.last_edits: list[EditApplied] = []
        self.pending: dict[str, ApprovalRequested] = {}
        self.corrections = CorrectionTracker()
        self.recording: str = "not started"
        self._open_lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._tasks: set[asyncio.Task] = set()
        self._map_feeder: MapFeeder | None = None

    # -- session ------------------------------------------------------------------------------

    async def ensure_session(self) -> Any:
        async with self._open_lock:
            if self.session is None:
                self._loop, self._loop_thread = asyncio.get_running_loop(), threading.get_ident()
                try:
                    self.session = await asyncio.to_thread(self._open)
                except Exception as exc:  # any failure to start is the user's to see, with its reason
                    log.exception("could not start the agent")
                    raise RequestFailed(f"teachback could not start the agent: {exc}") from exc
                self.session.subscribe(self._on_event)
                self.documents.attach(self._sink(self.session))
        return self.session

    def _open(self) -> Any:
        from agent.runtime import open_session

        session = open_session(self.root, self.options.settings, frontend="lsp")
        self.recording = self._attach_recorder(session)
        return session

    def _attach_recorder(self, session: Any) -> str:
        settings = self.options.settings
        if not settings.record:
            return "off (record = false)"
        try:
            from feedback_store import Recorder, StoreError, open_store
        except ImportError as exc:
            self.editor.show(f"teachback is not recording feedback: {exc}", types.MessageType.Warning)
            return f"off ({exc})"
        try:
            store = open_store(settings.db_path())
        except StoreError as exc:
            self.editor.show(f"teachback is not recording feedback: {exc}", types.MessageType.Warning)
            return f"off ({exc})"
        session.subscribe(Recorder(store))
        return str(settings.db_path())

    async def close(self) -> None:
        if self.session is None:
            return
        if self.turn is None:
            await self.flush_corrections()
        await self.session.close()

    # -- turns --------------------------------------------------------------------------------

    async def ask(self, request: AskRequest, request_id: Any) -> dict[str, Any]:
        if self.turn is not None:
            raise RequestFailed("teachback is already running a turn; wait for it, or run teachback.cancel.")
        self.turn = Turn(request_id)
        try:
            session = await self.ensure_session()
            await self.flush_corrections()
            op = user_input(request, self.documents)
            self.turn.progress = await self.editor.progress_begin("teachback", request.instruction[:80])
            try:
                finished = await session.run(op)
            except Exception as exc:  # a crash in the loop must reach the user as an answer, not a hang
                log.exception("the turn failed")
                raise RequestFailed(f"the turn failed: {exc}. The log has the details.") from exc
            finally:
                changes = session.last_turn_changes()
                mirrored = await mirror_turn(
                    changes, workspace=session.workspace, documents=self.documents, editor=self.editor,
                    label=f"teachback: {request.instruction[:60]}",
                )
        finally:
            turn, self.turn = self.turn, None
            self.pending.clear()
            self.editor.progress_end(turn.progress, "done")
        self.last_edits = turn.edits
        await self.flush_corrections()
        for change in changes:
            if change.after is not None:
                self.corrections.track(change.new_path or change.path, change.before or "", change.after)
        return {
            "turn": finished.turn,
            "reason": finished.reason,
            "summary": finished.summary,
            "steps": finished.steps,
            "costUsd": finished.cost_usd,
            "edits": [{"id": e.edit_id, "path": e.path, "kind": e.kind} for e in turn.edits],
            "files": [{"path": c.path, "kind": c.kind, "newPath": c.new_path} for c in changes],
            "applied": mirrored.applied,
            "leftOnDisk": list(mirrored.left_on_disk),
        }

    def cancel(self) -> bool:
        """Stop the running turn at its next step; False when none is running."""
        if self.turn is None or self.session is None:
            return False
        self.session.interrupt()
        self.editor.progress_report(self.turn.progress, "stopping after this step")
        return True

    def cancel_request(self, request_id: Any) -> None:
        if self.turn is not None and self.turn.request_id == request_id:
            self.cancel()

    def cancel_progress(self, token: Any) -> None:
        if self.turn is not None and self.turn.progress is not None and self.turn.progress == token:
            self.cancel()

    # -- review -------------------------------------------------------------------------------

    async def review(self, ident: str, accepted: bool, reason: str | None) -> dict[str, Any]:
        """Answer a pending approval, or review an edit (by id) or a file (by URI or path)."""
        if ident in self.pending:
            await self.session.submit(ApprovalDecision(request_id=ident, approved=accepted, comment=reason))
            return {"approval": ident, "approved": accepted}
        session = await self.ensure_session()
        from agent.review import ReviewError
        from agent.workspace import WorkspaceError

        edit = next((e for e in self.last_edits if e.edit_id == ident), None)
        try:
            if edit is not None:
                reviewed = await session.review_edit(ident, accepted, comment=reason)
            else:
                path = self.documents.ref(ident).path if ":" in ident else ident
                if path is None:
                    raise RequestFailed(f"{ident} is not a file in the workspace; send an edit id or a file URI.")
                reviewed = await session.review_file(path, accepted, comment=reason)
        except (ReviewError, WorkspaceError) as exc:
            raise RequestFailed(f"{exc} Ids come from the teachback.ask result or the log.") from exc
        self.corrections.forget(reviewed.path)
        if not accepted:
            await resync_open(
                [reviewed.path], workspace=session.workspace, documents=self.documents, editor=self.editor,
                label="teachback: rejected change",
            )
        return {"edit": reviewed.edit_id, "path": reviewed.path, "decision": reviewed.decision}

    async def undo(self) -> dict[str, Any]:
        if self.turn is not None:
            raise RequestFailed("a turn is running; run teachback.cancel first, then undo.")
        session = await self.ensure_session()
        from agent.checkpoint import UndoError

        try:
            restored = await session.undo()
        except UndoError as exc:
            raise RequestFailed(str(exc)) from exc
        for path in restored:
            self.corrections.forget(path)
        applied = await resync_open(
            restored, workspace=session.workspace, documents=self.documents, editor=self.editor,
            label="teachback: undo",
        )
        # undo dropped the restored files from the overlay; the editor's next change re-adds
        # them, and buffers the editor did not update go back now.
        self.documents.attach(self._sink(session), skip=set(restored) if applied else set())
        return {"restored": restored}

    def _sink(self, session: Any) -> OverlaySink:
        """Where open buffers go: the agent's overlay, and the repo map when there is one."""
        if self._map_feeder is None and session.context.repo_map is not None:
            self._map_feeder = MapFeeder(session.context.repo_map)
        if self._map_feeder is None:
            return session.workspace.overlay
        return Tee(session.workspace.overlay, self._map_feeder)

    def document_changed(self, path: str | None, text: str) -> None:
        if path is not None:
            self.corrections.observe(path, text)

    async def flush_corrections(self, path: str | None = None) -> None:
        """Record the user's pending edits to agent-written lines (all files, or `path`)."""
        if self.session is None or (path is not None and self.turn is not None):
            return  # a save during a turn: recorded when the turn ends
        if path is None:
            pending = self.corrections.take_all()
        else:
            taken = self.corrections.take(path)
            pending = {path: taken} if taken else {}
        from agent.review import ReviewError

        for rel, tracked in pending.items():
            assert tracked.pending is not None
            try:
                if tracked.pending == tracked.before:
                    # The user took the agent's change back by hand (editor undo): that is a rejection.
                    await self.session.review_file(rel, False, comment="undone in the editor")
                else:
                    await self.session.record_correction(rel, tracked.pending)
            except ReviewError as exc:
                log.info("not recording the user's edit to %s: %s", rel, exc)

    def status(self) -> dict[str, Any]:
        return {
            "session": self.session.id if self.session is not None else None,
            "running": self.turn is not None,
            "step": self.turn.step if self.turn else None,
            "pendingApprovals": [
                {"id": r.request_id, "action": r.action, "summary": r.summary} for r in self.pending.values()
            ],
            "lastEdits": [{"id": e.edit_id, "path": e.path, "kind": e.kind} for e in self.last_edits],
            "recording": self.recording,
            "openDocuments": len(self.documents),
        }

    # -- events -------------------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        loop = self._loop
        if loop is not None and threading.get_ident() != self._loop_thread:
            loop.call_soon_threadsafe(self._handle_event, event)
        else:
            self._handle_event(event)

    def _handle_event(self, event: Event) -> None:
        if self.options.events:
            self.editor.send_event(event.to_dict())
        line = describe.log_line(event)
        if line is not None:
            self.editor.log(*line)
        turn = self.turn
        if turn is not None:
            step = getattr(event, "step", None)
            if isinstance(step, int):
                turn.step = step
            message = describe.progress_message(event)
            if message is not None:
                percentage = min(99, turn.step * 100 // max(1, self.options.settings.max_steps))
                self.editor.progress_report(turn.progress, message, percentage)
            if isinstance(event, EditApplied):
                turn.edits.append(event)
        if isinstance(event, ApprovalRequested):
            self.pending[event.request_id] = event
            self._spawn(self._ask_approval(event))
        elif isinstance(event, ApprovalResolved):
            self.pending.pop(event.request_id, None)

    async def _ask_approval(self, request: ApprovalRequested) -> None:
        answer = await self.editor.choose(f"teachback wants to {request.action}: {request.summary}", [ALLOW, DENY])
        if request.request_id not in self.pending:
            return  # answered meanwhile with teachback.accept / teachback.reject
        if answer is None:
            self.editor.log(
                f"[approval {request.request_id}] no answer; run teachback.accept or teachback.reject with this id.",
                types.MessageType.Warning,
            )
            return
        await self.session.submit(ApprovalDecision(request_id=request.request_id, approved=answer == ALLOW))

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
