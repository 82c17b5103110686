"""The agent behind the language server: one session per workspace, one turn at a time.

The session (and with it litellm and the feedback store) is opened lazily, on the first request
that needs it, in a worker process (`turn_process = "worker"`, see lsp_server.worker) or in this
one (`"inline"`). Its events fan out to the editor: `teachback/event` notifications for rich
clients, plain lines on `window/logMessage`, the turn's step on `$/progress`, and
`window/showMessageRequest` for approvals. Nothing the agent does runs on the server's event loop
for long, so requests keep being served while a turn runs; a worker that dies is reported and
replaced by a new one at the next request.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from lsprotocol import types

from agent.interfaces import SessionClient
from agent.protocol import (
    ApprovalDecision,
    ApprovalRequested,
    ApprovalResolved,
    CorrectEdit,
    EditApplied,
    EditReviewed,
    Event,
    ReviewEdit,
    ReviewFile,
    TurnUndone,
    Undo,
)
from agent.remote import RemoteError, RemoteSession, WorkerStopped
from agent.workspace import Workspace
from host.worker import SpareWorker, warm_up_imports
from lsp_server import describe
from lsp_server.commands import AskRequest, RequestFailed
from lsp_server.corrections import CorrectionTracker
from lsp_server.disk_view import DiskView
from lsp_server.documents import Documents, OverlaySink
from lsp_server.editor import Editor
from lsp_server.mirror import mirror_turn, resync_open
from lsp_server.options import ServerOptions
from lsp_server.prompting import user_input
from lsp_server.worker import WORKER, open_hosted, open_params, overlay_sink, recording_info

log = logging.getLogger(__name__)

ALLOW, DENY = "Allow", "Deny"


class EditorSession(SessionClient, Protocol):
    """The session the server holds (a RemoteSession, or a Session inline) and the workspace on this
    side through which the editor's files are written and read."""

    workspace: Workspace


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
        self.session: EditorSession | None = None  # a Session (inline, imported lazily) or a RemoteSession
        self.turn: Turn | None = None
        self.last_edits: list[EditApplied] = []
        self.pending: dict[str, ApprovalRequested] = {}
        self.corrections = CorrectionTracker()
        self.disk = DiskView(root)  # the open files as the editor saw them, while the agent may write
        self.recording: str = "not started"
        self._hosted: Any = None  # an inline session's recording and lessons (host.session.HostedSession)
        self._open_lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._tasks: set[asyncio.Task] = set()
        self._sink: OverlaySink | None = None  # where open buffers go, once the session is open
        self._spare = SpareWorker(WORKER, root, on_stop=self._worker_stopped)  # started ahead, to warm up

    @property
    def in_worker(self) -> bool:
        return self.options.settings.turn_process == "worker"

    # -- session ------------------------------------------------------------------------------

    def warm_up(self) -> None:
        """Get the agent ready for the first turn without opening a session yet."""
        if self.in_worker:  # a failure to start is logged; the first request tries again, and reports it
            self._spawn(self._spare.start())
        else:  # a daemon thread: an editor that quits during the warm-up must not wait for it
            threading.Thread(target=warm_up_imports, name="teachback-warm-up", daemon=True).start()

    async def ensure_session(self) -> EditorSession:
        async with self._open_lock:
            if self.session is None:
                self._loop, self._loop_thread = asyncio.get_running_loop(), threading.get_ident()
                try:
                    session, self._sink, warnings = await (self._open_worker() if self.in_worker else self._open())
                except Exception as exc:  # any failure to start is the user's to see, with its reason
                    log.exception("could not start the agent")
                    raise RequestFailed(f"teachback could not start the agent: {exc}") from exc
                for warning in warnings:
                    self.editor.show(warning, types.MessageType.Warning)
                session.subscribe(self._on_event)
                self.session = session
                self.documents.attach(self._sink)
        return self.session

    async def _open(self) -> tuple[EditorSession, OverlaySink, list[str]]:
        self._hosted = await asyncio.to_thread(open_hosted, self.root, self.options.settings)
        self.recording = recording_info(self._hosted)
        return self._hosted.session, overlay_sink(self._hosted.session), self._hosted.warnings

    async def _open_worker(self) -> tuple[EditorSession, OverlaySink, list[str]]:
        worker = self._spare.take()  # the session's now
        try:
            info = await worker.open(open_params(self.root, self.options.settings))
        except BaseException:
            await worker.close()
            raise
        self.recording = info["recording"]
        return worker, worker.overlay, info["warnings"]

    def _worker_stopped(self, how: str) -> None:
        if isinstance(self.session, RemoteSession) and not self.session.alive:
            self.session = None
        if self.turn is None:  # during a turn, the turn's answer says it
            self.editor.show(
                f"teachback: {how}. The next request starts a new one; the server's log has the details.",
                types.MessageType.Warning,
            )

    async def close(self) -> None:
        await self._spare.close()
        if self.session is None:
            return
        if self.turn is None:
            await self.flush_corrections()
        await self.session.close()
        if self._hosted is not None:  # inline sessions (the worker closes its own)
            await asyncio.to_thread(self._hosted.close)
            self._hosted = None

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
            with self.disk.watch(self.documents.by_path()):
                finished, changes, mirrored = await self._run(session, op, request.instruction)
        finally:
            turn, self.turn = self.turn, None
            self.pending.clear()
            self.editor.progress_end(turn.progress, "done")
        if finished.reason == "error":  # the answer alone is easy to miss: most editors show only messages
            self.editor.show(f"teachback: the turn failed: {finished.summary}", types.MessageType.Error)
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

    async def _run(self, session: EditorSession, op: Any, instruction: str) -> tuple[Any, Any, Any]:
        """Run the turn and bring the editor in step with what it changed."""
        label = f"teachback: {instruction[:60]}"
        try:
            finished = await session.run(op)
        except WorkerStopped as exc:
            raise await self._turn_lost(session, str(exc)) from exc
        except Exception as exc:  # a crash in the loop must reach the user as an answer, not a hang
            log.exception("the turn failed")
            await self._mirror(session, label)
            raise RequestFailed(f"the turn failed: {exc}. The log has the details.") from exc
        changes, mirrored = await self._mirror(session, label)
        return finished, changes, mirrored

    async def _mirror(self, session: EditorSession, label: str) -> tuple[Any, Any]:
        changes = session.last_turn_changes()
        mirrored = await mirror_turn(
            changes,
            workspace=session.workspace,
            documents=self.documents,
            disk=self.disk,
            editor=self.editor,
            label=label,
        )
        return changes, mirrored

    async def _turn_lost(self, session: EditorSession, how: str) -> RequestFailed:
        """The worker died mid-turn: open buffers take its edits, other files keep them on disk; say so."""
        assert self.turn is not None
        paths = sorted({p for e in self.turn.edits for p in (e.path, e.new_path) if p})
        self.session = None
        self.last_edits = []
        applied = await resync_open(
            paths,
            workspace=session.workspace,
            documents=self.documents,
            disk=self.disk,
            editor=self.editor,
            label="teachback: edits of a stopped turn",
        )
        held = self.documents.by_path() if applied else {}
        buffered = [p for p in paths if p in held]
        self.disk.unsaved.update(buffered)
        on_disk = [p for p in paths if p not in held]
        kept = [f"the edits it made are in your open buffers, unsaved ({', '.join(buffered)})"] if buffered else []
        kept += [f"the edits it made stay on disk ({', '.join(on_disk)})"] if on_disk else []
        said = "; ".join(kept) + "; teachback.undo takes them back" if paths else "it had changed no file"
        return RequestFailed(
            f"the turn stopped: {how}; {said}. The next request starts a new agent process "
            "(a new session); the server's log has the details."
        )

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
            try:
                await self.session.submit(ApprovalDecision(request_id=ident, approved=accepted, comment=reason))
            except (WorkerStopped, KeyError) as exc:
                raise RequestFailed(f"approval {ident} is no longer pending ({exc}).") from exc
            return {"approval": ident, "approved": accepted}
        session = await self.ensure_session()
        with self.disk.watch(self.documents.by_path()):
            edit = next((e for e in self.last_edits if e.edit_id == ident), None)
            try:
                if edit is not None:
                    reviewed = await session.submit(ReviewEdit(edit_id=ident, accepted=accepted, comment=reason))
                else:
                    path = self.documents.ref(ident).path if ":" in ident else ident
                    if path is None:
                        raise RequestFailed(f"{ident} is not a file in the workspace; send an edit id or a file URI.")
                    reviewed = await session.submit(ReviewFile(path=path, accepted=accepted, comment=reason))
            except _refusals() as exc:
                raise RequestFailed(f"{exc} Ids come from the teachback.ask result or the log.") from exc
            assert isinstance(reviewed, EditReviewed)  # what a review is answered by
            self.corrections.forget(reviewed.path)
            if not accepted:
                await resync_open(
                    [reviewed.path],
                    workspace=session.workspace,
                    documents=self.documents,
                    disk=self.disk,
                    editor=self.editor,
                    label="teachback: rejected change",
                )
        return {"edit": reviewed.edit_id, "path": reviewed.path, "decision": reviewed.decision}

    async def undo(self) -> dict[str, Any]:
        if self.turn is not None:
            raise RequestFailed("a turn is running; run teachback.cancel first, then undo.")
        session = await self.ensure_session()
        with self.disk.watch(self.documents.by_path()):
            try:
                undone = await session.submit(Undo())
            except _refusals() as exc:
                raise RequestFailed(str(exc)) from exc
            assert isinstance(undone, TurnUndone)  # what an undo is answered by
            restored = undone.paths
            for path in restored:
                self.corrections.forget(path)
            # Buffers still holding agent changes never saved: their files are as the checkpoint has them.
            buffered = self.disk.unsaved & set(self.documents.by_path())
            applied = await resync_open(
                sorted(set(restored) | buffered),
                workspace=session.workspace,
                documents=self.documents,
                disk=self.disk,
                editor=self.editor,
                label="teachback: undo",
            )
        if applied:
            self.disk.unsaved -= buffered
        taken_back = sorted(set(restored) | (buffered if applied else set()))
        # undo dropped the restored files from the overlay; the editor's next change re-adds
        # them, and buffers the editor did not update go back now.
        assert self._sink is not None
        self.documents.attach(self._sink, skip=set(restored) if applied else set())
        return {"restored": taken_back}

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
        for rel, tracked in pending.items():
            assert tracked.pending is not None
            try:
                if tracked.pending == tracked.before:
                    # The user took the agent's change back by hand (editor undo): that is a rejection.
                    await self.session.submit(ReviewFile(path=rel, accepted=False, comment="undone in the editor"))
                else:
                    await self.session.submit(CorrectEdit(path=rel, user_content=tracked.pending))
            except _refusals() as exc:
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
            "turnProcess": self.options.settings.turn_process,
            "agentPid": self.session.pid if isinstance(self.session, RemoteSession) else None,
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
        try:
            await self.session.submit(ApprovalDecision(request_id=request.request_id, approved=answer == ALLOW))
        except (WorkerStopped, KeyError) as exc:  # the turn ended meanwhile
            log.info("approval %s no longer pending: %s", request.request_id, exc)

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _refusals() -> tuple[type[Exception], ...]:
    """What a review, correction or undo raises when it cannot be done. Called in `except` clauses,
    so the agent's modules are imported only once such an error has happened."""
    from agent.checkpoint import UndoError
    from agent.review import ReviewError
    from agent.workspace import WorkspaceError

    return ReviewError, WorkspaceError, UndoError, WorkerStopped, RemoteError
