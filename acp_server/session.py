"""One ACP session: its turns in a worker process, its updates sent in order, its permissions.

The session's events arrive from the worker (agent.remote) and become `session/update`s
(acp_server.updates) on one queue, sent one after another, so the editor sees them in the order the
agent emitted them; a prompt is answered only once its updates are out. An approval the policy asks
for becomes `session/request_permission`; an "always" answer is kept as a rule for the rest of the
session and answers the same question from then on (each such decision is recorded with the rule
that made it, in the approval's comment). A worker that dies is reported in the prompt's error and
replaced by a new one at the next prompt, resumed from the store. When the editor offers `terminal/*`,
the worker's commands run in its terminals (acp_server.terminals).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp import RequestError, text_block, tool_content, update_agent_message_text
from acp.schema import PermissionOption, SessionMode, SessionModeState, ToolCallUpdate

from acp_server import commands
from acp_server.terminals import EditorTerminals
from acp_server.updates import STOP_REASONS, Translator, approval_content, tool_call_id
from acp_server.worker import WORKER, open_params
from acp_server.worker_files import READ, WRITE
from acp_server.worker_terminal import RUN
from agent.config import APPROVAL_MODES, Settings
from agent.protocol import (
    ApprovalDecision,
    ApprovalRequested,
    Event,
    ModeChanged,
    PlanProposed,
    ReviewPlan,
    SetMode,
    TurnFinished,
    UserInput,
)
from agent.remote import RemoteError, RemoteSession, WorkerStopped
from host.worker import SpareWorker

log = logging.getLogger(__name__)

OPTIONS = [
    PermissionOption(option_id="allow_once", name="Allow", kind="allow_once"),
    PermissionOption(option_id="allow_always", name="Always allow in this session", kind="allow_always"),
    PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
    PermissionOption(option_id="reject_always", name="Always reject in this session", kind="reject_always"),
]

# A plan asked about when a plan-mode turn ends: the option id is the approval mode it goes on in.
# "Keep planning" leaves it waiting: the next prompt, still in plan mode, sends it back as its reason.
PLAN_OPTIONS = [
    PermissionOption(option_id="auto-edit", name="Yes, and edit without asking", kind="allow_once"),
    PermissionOption(option_id="ask", name="Yes, and ask before each edit", kind="allow_once"),
    PermissionOption(option_id="plan", name="No, keep planning", kind="reject_once"),
]


@dataclass(frozen=True)
class ClientOffers:
    """What the editor said it can do for the agent (its clientCapabilities)."""

    read: bool = False
    write: bool = False
    terminal: bool = False


def rule_for(request: ApprovalRequested) -> tuple[str, str, str]:
    """The rule an "always" answer to `request` makes: (action, subject, how it reads)."""
    if request.action == "edit":
        return "edit", "*", "every edit"
    if request.action == "command":
        return "command", request.detail, f"the command `{request.detail}`"
    tool = request.summary.removeprefix("Call ")
    return request.action, tool, f"calls of {tool}"


class AcpSession:
    def __init__(
        self,
        client: Any,  # the editor: acp.interfaces.Client (AgentSideConnection)
        session_id: str,
        root: Path,
        settings: Settings,
        offers: ClientOffers,
        mcp_servers: list[dict[str, Any]],
    ) -> None:
        self.client = client
        self.id = session_id
        self.root = root
        self.settings = settings
        self.offers = offers
        self.mcp_servers = mcp_servers  # the editor's, kept for the session and passed to its worker
        self.rules: dict[tuple[str, str], bool] = {}  # (action, subject) -> allowed, from "always" answers
        self.translator = Translator(root)
        self.recorded = False  # the session has a history in the store (a load, or a worker that died)
        self.warnings: list[str] = []
        self.mode = settings.approval  # the session's approval mode, as its ModeChanged events say
        self.plan: PlanProposed | None = None  # the plan the running prompt's turn ended with
        self.terminals = EditorTerminals(client, session_id, self._show_terminal)
        self._remote: RemoteSession | None = None
        self._open_lock = asyncio.Lock()
        self._queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._sender = asyncio.ensure_future(self._send_all())
        self._tasks: set[asyncio.Task[None]] = set()
        self._running = False

    # -- the worker ---------------------------------------------------------------------------

    async def open(self, worker: RemoteSession | None = None) -> RemoteSession:
        """The session's worker, opened (in `worker`, started ahead, when given) on first use."""
        async with self._open_lock:
            if self._remote is not None and self._remote.alive:
                return self._remote
            remote = worker if worker is not None and worker.alive else SpareWorker(WORKER).take()
            remote.on_call = self._client_call
            fs = {"read": self.offers.read, "write": self.offers.write}
            params = open_params(
                self.root,
                self.settings,
                self.id,
                resume=self.recorded,
                client_fs=fs,
                mcp_servers=self.mcp_servers,
                client_terminal=self.offers.terminal,
            )
            try:
                info = await remote.open(params)
            except BaseException:
                await remote.close()
                raise
            remote.subscribe(self._on_event)
            self.translator.context_size = int(info.get("context_window") or 0)
            self.warnings.extend(info.get("warnings", ()))
            self._remote = remote
            return remote

    async def close(self) -> None:
        if self._remote is not None:
            await self._remote.close()
        self._sender.cancel()

    async def _client_call(self, method: str, params: dict[str, Any]) -> Any:
        """The worker asks the editor (fs/*) on its tools' behalf."""
        if method == READ and self.offers.read:
            answer = await self.client.read_text_file(session_id=self.id, path=params["path"])
            return {"content": answer.content}
        if method == WRITE and self.offers.write:
            await self.client.write_text_file(session_id=self.id, path=params["path"], content=params["content"])
            return {}
        if method == RUN and self.offers.terminal:
            return await self.terminals.run(params)
        raise RuntimeError(f"the editor does not offer {method}")

    def _show_terminal(self, call_id: str, terminal_id: str) -> None:
        self._queue.put_nowait(("update", self.translator.attach_terminal(call_id, terminal_id)))

    # -- a turn -------------------------------------------------------------------------------

    async def prompt(self, op: UserInput) -> str:
        """Run one turn; its stop reason once every update is sent."""
        if self._running:
            raise RequestError.invalid_request({"details": "a prompt is already running in this session; cancel it"})
        self._running = True
        try:
            remote = await self.open()
            for warning in self.warnings:
                self._queue.put_nowait(("text", f"teachback: {warning}\n\n"))
            self.warnings.clear()
            try:
                self.plan = None
                finished: TurnFinished = await remote.run(op)
                if self.plan is not None and self.mode == "plan" and (verdict := await self._ask_plan(self.plan)):
                    await self._queue.join()
                    finished = await remote.submit(verdict)  # type: ignore[assignment]
            except WorkerStopped as exc:
                self.recorded = True  # the next prompt resumes the recorded conversation
                await self._queue.join()
                raise RequestError.internal_error(
                    {
                        "details": f"the turn stopped: {exc}. Edits it made stay on disk; the next prompt starts a new "
                        "agent process on this session. Run with TEACHBACK_LOG_LEVEL=INFO for details."
                    }
                ) from exc
            await self._queue.join()
        finally:
            self._running = False
        if finished.reason == "error":
            raise RequestError.internal_error({"details": finished.summary})
        return STOP_REASONS[finished.reason]

    def modes(self) -> SessionModeState:
        return SessionModeState(
            current_mode_id=self.mode, available_modes=[SessionMode(id=mode, name=mode) for mode in APPROVAL_MODES]
        )

    async def set_mode(self, mode: str) -> None:
        if mode not in APPROVAL_MODES:
            raise RequestError.invalid_params({"details": f"unknown mode {mode!r}; one of {', '.join(APPROVAL_MODES)}"})
        await (await self.open()).submit(SetMode(mode=mode))

    async def _ask_plan(self, plan: PlanProposed) -> ReviewPlan | None:
        """Approve the plan in a mode, or keep planning (None)."""
        call = ToolCallUpdate(
            tool_call_id=tool_call_id(self.translator.turn, "plan"),
            title="Ready to implement the plan?",
            kind="switch_mode",
            status="pending",
            content=[tool_content(text_block(plan.plan))],
        )
        try:
            response = await self.client.request_permission(session_id=self.id, tool_call=call, options=PLAN_OPTIONS)
        except (ConnectionError, RequestError) as exc:
            log.warning("could not ask about the plan: %s", exc)
            return None
        chose = getattr(response.outcome, "option_id", "plan")
        return ReviewPlan(approved=True, mode=chose) if chose in ("auto-edit", "ask") else None

    async def command(self, name: str) -> str:
        """Run the slash command `name` (acp_server.commands) instead of a turn; its stop reason."""
        if self._running:
            raise RequestError.invalid_request({"details": "a prompt is already running in this session; cancel it"})
        self._running = True
        try:
            return await commands.run(self, name)
        finally:
            self._running = False

    async def say(self, text: str) -> None:
        """An agent message, sent after every update before it."""
        self._queue.put_nowait(("text", text))
        await self._queue.join()

    def advertise(self) -> None:
        """Tell the editor the session's slash commands."""
        self._queue.put_nowait(("update", commands.available_commands()))

    def cancel(self) -> None:
        if self._remote is not None and self._running:
            self._remote.interrupt()
            task = asyncio.ensure_future(self.terminals.kill_all())  # a command in the editor stops now too
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def replay(self, events: list[Event]) -> None:
        """Send a recorded session's updates (session/load), in order."""
        recorded = Translator(self.root, replay=True)
        for event in events:
            for update in recorded.updates(event):
                self._queue.put_nowait(("update", update))
        await self._queue.join()

    # -- events, updates and permissions ------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        self.terminals.note(event)
        if isinstance(event, ModeChanged):
            self.mode = event.mode
        elif isinstance(event, PlanProposed):
            self.plan = event
        for update in self.translator.updates(event):
            self._queue.put_nowait(("update", update))
        if isinstance(event, ApprovalRequested):
            self._queue.put_nowait(("ask", event))

    async def _send_all(self) -> None:
        while True:
            kind, item = await self._queue.get()
            try:
                if kind == "ask":
                    task = asyncio.ensure_future(self._ask(item))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                else:
                    update = item if kind == "update" else update_agent_message_text(item)
                    await self.client.session_update(session_id=self.id, update=update)
            except (ConnectionError, RequestError) as exc:  # the editor is gone or refused one: go on
                log.warning("could not send a session/update: %s", exc)
            finally:
                self._queue.task_done()

    async def _ask(self, request: ApprovalRequested) -> None:
        action, subject, text = rule_for(request)
        rule = self.rules.get((action, subject))
        if rule is not None:
            verdict = "allowed" if rule else "rejected"
            decision = ApprovalDecision(
                request_id=request.request_id, approved=rule, comment=f"{verdict} by this session's rule for {text}"
            )
        else:
            decision = await self._ask_editor(request, (action, subject), text)
        try:
            assert self._remote is not None
            await self._remote.submit(decision)
        except (KeyError, WorkerStopped, RemoteError) as exc:  # the turn ended meanwhile (a cancel)
            log.info("approval %s no longer pending: %s", request.request_id, exc)

    async def _ask_editor(self, request: ApprovalRequested, key: tuple[str, str], text: str) -> ApprovalDecision:
        title, kind = describe_request(request)
        call = ToolCallUpdate(
            tool_call_id=tool_call_id(self.translator.turn, request.call_id),
            title=title,
            kind=kind,
            status="pending",
            content=approval_content(request),
        )
        try:
            response = await self.client.request_permission(session_id=self.id, tool_call=call, options=OPTIONS)
        except (ConnectionError, RequestError) as exc:
            return ApprovalDecision(request_id=request.request_id, approved=False, comment=f"the editor failed: {exc}")
        outcome = response.outcome
        if outcome.outcome != "selected":
            return ApprovalDecision(request_id=request.request_id, approved=False, comment="cancelled in the editor")
        choice = outcome.option_id
        approved = choice.startswith("allow")
        comment = None
        if choice.endswith("_always"):
            self.rules[key] = approved
            comment = f"{'allowed' if approved else 'rejected'} for the rest of this session: {text}"
        return ApprovalDecision(request_id=request.request_id, approved=approved, comment=comment)


def describe_request(request: ApprovalRequested) -> tuple[str, str]:
    """Title and kind for a permission request (the call's own arguments are not in the request)."""
    if request.action == "command":
        return f"Run `{request.detail}`", "execute"
    if request.action == "edit":
        return f"Apply: {request.summary}", "edit"
    return request.summary, "other"
