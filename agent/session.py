"""The session loop: ask the model with the tool schemas, run each tool call, append the results,
repeat until the model answers without a call or calls `finish`, or a limit stops it."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from agent.approval import ApprovalPolicy
from agent.call_runner import CallRunner
from agent.config import APPROVAL_MODES, settings_dict, teachback_home
from agent.exits import Answered, Blocked, Finished, Interrupted, LimitExceeded, LoopExit, ModelFailed
from agent.hooks.config import HookSet
from agent.hooks.runner import Hooks
from agent.instructions import Found, ProjectInstructions
from agent.interfaces import LessonSource, Model
from agent.lesson_feed import LessonFeed
from agent.limits import TurnLimits
from agent.listeners import Listeners
from agent.loop_guard import LoopGuard
from agent.model import ModelError, ModelReply
from agent.plan_mode import PLAN, Planning
from agent.protocol import (
    ApprovalDecision,
    AssistantDelta,
    AssistantMessage,
    CorrectEdit,
    ErrorEvent,
    Event,
    HookRan,
    Interrupt,
    ModeChanged,
    ModelUsage,
    Op,
    ReviewEdit,
    ReviewFile,
    ReviewPlan,
    SessionStarted,
    SetMode,
    TurnFinished,
    TurnStarted,
    Undo,
    UserInput,
    new_id,
)
from agent.review import Review
from agent.toolkit import Toolbox, ToolServers
from agent.tools.context import ToolContext
from agent.workspace import FileChange

log = logging.getLogger(__name__)
MAX_STOP_CONTINUATIONS = 3  # a turn a Stop hook keeps going, at most this many times


class Session:
    def __init__(
        self,
        *,
        model: Model,
        toolbox: Toolbox,
        context: ToolContext,
        frontend: str,
        system_prompt: Callable[[UserInput], str],
        session_id: str | None = None,
        history: list[dict[str, Any]] | None = None,
        git_head: str | None = None,
        repository: str | None = None,
        lessons: LessonSource | None = None,
        tool_servers: ToolServers | None = None,
        hooks: HookSet | None = None,
    ) -> None:
        self.id = session_id or new_id()
        self.model = model
        self.toolbox = toolbox
        self.context = context
        self.workspace = context.workspace
        self.settings = context.settings
        self.policy = ApprovalPolicy.from_settings(self.settings)
        self.frontend = frontend
        self.git_head = git_head
        self.repository = repository
        self.messages: list[dict[str, Any]] = list(history or [])
        self.turn = sum(1 for m in self.messages if m.get("role") == "user")
        self.review = Review(self.id, self.workspace, context, self.emit)
        self._system_prompt = system_prompt
        self.listeners = Listeners(failed=self._listener_failed)
        self.limits = TurnLimits(self.settings)
        self.guard = LoopGuard()
        self._running = False
        self.plans = Planning(self.id, self.emit)
        self._said: str | None = None  # the last AssistantMessage: the one a plan-mode turn ends with
        self.lessons = lessons
        self.feed = LessonFeed(
            lessons,
            session_id=self.id,
            settings=self.settings,
            workspace=self.workspace,
            model_name=model.name,
            repository=repository,
            emit=self.emit,
        )
        self.instructions = ProjectInstructions(self.workspace, teachback_home(), self.settings.instructions_bytes)
        self.instructions.resume(self.messages)
        self.hook_set = hooks or HookSet()
        self.hooks = Hooks(
            self.hook_set.hooks,
            root=self.workspace.root,
            session_id=self.id,
            emit=self.emit,
            builtins=(self.feed.guard_hook(),),
            permission_mode=self.settings.approval,
        )
        self._continued = 0  # times a Stop hook kept this turn going
        self.calls = CallRunner(
            session_id=self.id,
            context=context,
            policy=self.policy,
            messages=self.messages,
            guard=self.guard,
            feed=self.feed,
            instructions=self.instructions,
            hooks=self.hooks,
            emit=self.emit,
            interruptible=self.limits.interruptible,
        )
        self.tool_servers = tool_servers  # MCP servers: started before the first turn, their tools added
        self._servers_started = False
        self._ops: dict[type[Op], Callable[[Any], Awaitable[Event | None]]] = {
            UserInput: self.run,
            ApprovalDecision: self.calls.decide,
            Interrupt: self._interrupted,
            ReviewEdit: self.review.review_edit,
            ReviewFile: self.review.review_file,
            CorrectEdit: self.review.record_correction,
            Undo: self.review.undo,
            SetMode: self._set_mode,
            ReviewPlan: self._review_plan,
        }

    # -- the protocol: Ops in, Events out ---------------------------------------------------------

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        return self.listeners.subscribe(callback)

    def emit(self, event: Event) -> Event:
        return self.listeners.emit(event)

    def _listener_failed(self, event: Event) -> None:
        if not isinstance(event, ErrorEvent):
            message = f"A listener failed while handling {event.type}; see the log."
            self.emit(ErrorEvent(session_id=self.id, cause_id=event.id, kind="subscriber", message=message))

    async def submit(self, op: Op) -> Event | None:
        """Serve `op`; its reply is the event it ended with (a turn's TurnFinished, a review's
        EditReviewed, an undo's TurnUndone), or None for an op that only steers (an approval, an
        interrupt, a correction that matches the agent's version)."""
        serve = self._ops.get(type(op))
        if serve is None:
            raise ValueError(f"a session does not serve {op.type} ops")
        return await serve(op)

    def interrupt(self) -> None:
        self.limits.interrupt()

    async def _interrupted(self, op: Interrupt) -> None:
        self.interrupt()

    async def _set_mode(self, op: SetMode) -> ModeChanged:
        """Judge the calls from the next one on by `op.mode`; leaving plan mode approves a waiting plan."""
        if op.mode not in APPROVAL_MODES:
            raise ValueError(f"unknown approval mode {op.mode!r}; known: {', '.join(APPROVAL_MODES)}")
        previous = self.policy.mode
        if previous == PLAN and op.mode != PLAN:
            self.plans.reviewed(True, None, op.mode)
        self.policy = dataclasses.replace(self.policy, mode=op.mode)
        self.calls.path.policy = self.policy
        return self.emit(ModeChanged(session_id=self.id, cause_id=op.id, mode=op.mode, previous=previous))  # type: ignore[return-value]

    async def _review_plan(self, op: ReviewPlan) -> TurnFinished:
        """Approve the waiting plan (and implement it in the chosen mode) or send it back (and plan again)."""
        if self._running:
            raise RuntimeError("a turn is running in this session; review the plan once it has ended")
        mode, instruction = self.plans.verdict(op)
        if mode != self.policy.mode:
            await self._set_mode(SetMode(mode=mode))
        return await self.run(UserInput(text=instruction))

    def last_turn_changes(self) -> list[FileChange]:
        return self.review.last_turn_changes()

    async def close(self) -> None:
        """Stop a running turn at its next step, decline pending approvals, drop subscribers, stop
        the MCP servers."""
        self.interrupt()
        self.calls.decline_all("The session was closed.")
        self.listeners.clear()
        if self.tool_servers is not None:
            await self.tool_servers.close()

    # -- the loop -----------------------------------------------------------------------------

    async def run(self, op: UserInput) -> TurnFinished:
        """One turn: ask the model, run its calls, repeat until it is done or a limit stops it."""
        started = await self._start_turn(op)
        if isinstance(started, TurnFinished):  # a UserPromptSubmit hook blocked the prompt
            return started
        try:
            while True:
                step = self.limits.next_step()
                reply, said = await self._query(step, started.id)
                try:
                    await self._act(reply, step, said)
                except (Answered, Finished) as done:
                    if not await self._stop_hooks_continue(done, said):
                        raise
        except LoopExit as exit_:
            reason, summary = exit_.reason, exit_.summary
        except Exception as exc:  # a bug must still end the turn visibly, with the log to look at
            log.exception("turn %d of session %s failed", self.turn, self.id)
            reason, summary = "error", f"teachback failed unexpectedly: {exc!r} (details in the log)"
            self.emit(ErrorEvent(session_id=self.id, cause_id=started.id, kind="internal", message=summary))
        finally:
            self._running = False
        self.plans.turn_ended(reason, summary, self.turn, self.policy.mode, self._said)
        return self.emit(
            TurnFinished(
                session_id=self.id,
                cause_id=started.id,
                turn=self.turn,
                reason=reason,
                summary=summary,
                **self.limits.totals,
            )
        )

    async def _query(self, step: int, cause: str) -> tuple[ModelReply, str]:
        """Ask the model; its reply, appended to the conversation and emitted with its usage, and
        the id of its AssistantMessage."""
        self.guard.start_step()
        on_delta = lambda text: self.emit(AssistantDelta(session_id=self.id, cause_id=cause, text=text))  # noqa: E731
        try:
            reply = await self.limits.interruptible(
                self.model.complete(self.messages, self.toolbox.schemas(), on_delta), self.limits.deadline
            )
        except ModelError as exc:
            self.emit(ErrorEvent(session_id=self.id, cause_id=cause, kind=exc.kind, message=str(exc)))
            raise ModelFailed(str(exc)) from exc
        self.messages.append(reply.message)
        said = self.emit(
            AssistantMessage(session_id=self.id, cause_id=cause, step=step, message=reply.message, text=reply.text)
        )
        self._said = said.id
        self.emit(ModelUsage.from_reply(reply, session_id=self.id, cause_id=said.id, model=self.model.name, step=step))
        self.limits.spend(reply)
        return reply, said.id

    async def _act(self, reply: ModelReply, step: int, cause: str) -> None:
        """Run the reply's tool calls in order; a reply without one ends the turn."""
        if reply.format_error:
            self.calls.reject_reply(reply.format_error, step, cause)
            return
        if not reply.tool_calls:
            self.limits.check_cut(reply.finish_reason)
            raise Answered(reply.message.get("content") or "")
        finished: str | None = None
        for index, call in enumerate(reply.tool_calls):
            if self.limits.interrupted:
                self.calls.skip(reply.tool_calls[index:], step, cause)
                raise Interrupted("Interrupted by the user.")
            try:
                result = await self.calls.run(call, self.toolbox, step, cause, self.limits.deadline)
            except LoopExit:
                self.calls.skip(reply.tool_calls[index + 1 :], step, cause)
                raise
            if call["function"]["name"] == "finish" and result.ok:
                finished = result.output
            if (stuck := self.guard.stuck(result.error_kind)) is not None:
                self.calls.skip(reply.tool_calls[index + 1 :], step, cause)
                raise LimitExceeded("stuck", stuck)
        if finished is not None:
            raise Finished(finished)

    async def _stop_hooks_continue(self, done: LoopExit, cause: str) -> bool:
        """Whether the Stop hooks keep the turn going (a block, with its reason sent to the model as a
        user message), at most MAX_STOP_CONTINUATIONS times a turn."""
        if not self.hooks.wants("Stop") or self._continued >= MAX_STOP_CONTINUATIONS:
            return False
        payload = {"stop_hook_active": self._continued > 0, "last_assistant_message": done.summary}
        verdict = await self.hooks.run("Stop", payload, cause=cause)
        if verdict.stop is not None:
            raise Blocked(verdict.stop)
        if verdict.decision != "block":
            return False
        self._continued += 1
        message = {"role": "user", "content": f"A Stop hook asks you to go on before you finish: {verdict.reason}"}
        self.messages.append(message)
        self.emit(
            HookRan(
                session_id=self.id,
                cause_id=cause,
                hook_event="Stop",
                hook="Stop",
                source="",
                decision="block",
                reason=verdict.reason,
                message=message,
            )
        )
        return True

    async def _prompt_blocked(self, op: UserInput) -> tuple[TurnFinished | None, str]:
        """The UserPromptSubmit hooks' answer: the blocked turn's end (nothing reaches the model), or
        None and the context they add to the prompt."""
        if not self.hooks.wants("UserPromptSubmit"):
            return None, ""
        verdict = await self.hooks.run("UserPromptSubmit", {"prompt": op.text}, cause=op.id)
        if verdict.stop is None and verdict.decision != "block":
            return None, verdict.context
        why = verdict.stop or verdict.reason
        summary = f"A UserPromptSubmit hook blocked this prompt: {why}"
        self.emit(ErrorEvent(session_id=self.id, cause_id=op.id, kind="hook", message=summary))
        self._running = False
        finished = TurnFinished(session_id=self.id, cause_id=op.id, turn=self.turn, reason="blocked", summary=summary)
        return self.emit(finished), ""  # type: ignore[return-value]

    async def _start_turn(self, op: UserInput) -> TurnStarted | TurnFinished:
        """Start the session (on its first turn) and the turn: the user's message, appended and
        emitted; or the turn's end, when a hook blocked the prompt."""
        if self._running:
            raise RuntimeError("a turn is already running in this session; interrupt it or wait for it to end")
        self._running = True
        try:
            notices = await self._start_servers()
            await self.start(op)
        except BaseException:
            self._running = False
            raise
        for notice in notices:
            self.emit(ErrorEvent(session_id=self.id, kind="mcp", message=notice))
        if self.turn == 0 and (withheld := self.hook_set.notice(self.workspace.root)):
            self.emit(ErrorEvent(session_id=self.id, kind="hook", message=withheld))
        blocked, context = await self._prompt_blocked(op)
        if blocked is not None:
            return blocked
        self.plans.turn_starting(op.text, self.policy.mode)
        self._said = None
        self.turn += 1
        self._continued = 0
        self.limits.start_turn()
        self.calls.start_turn(self.turn)
        self.guard.start_turn()
        self.context.changes.start_turn()
        # The instructions of the folders of the files the user points at come with the message.
        found = self.instructions.for_paths(ref.path for ref in op.context)
        content = _user_content(op) + found.text(start=False) + (f"\n\n{context}" if context else "")
        message = {"role": "user", "content": self.plans.turn_text(content, self.policy.mode)}
        self.messages.append(message)
        started = self.emit(
            TurnStarted(
                session_id=self.id,
                cause_id=op.id,
                turn=self.turn,
                text=op.text,
                message=message,
                context=[ref.to_dict() for ref in op.context],
            )
        )
        self.calls.notify(found, started.id)
        return started  # type: ignore[return-value]

    async def _start_servers(self) -> tuple[str, ...]:
        """Start the tool servers (once, in parallel, each within its start-up timeout) and add their
        tools, before the system prompt and the tool schemas are recorded; their notices to show."""
        if self.tool_servers is None or self._servers_started:
            return ()
        self._servers_started = True
        served = await self.tool_servers.start()
        self.toolbox = self.toolbox.extended(served.tools, served.unavailable)
        return served.notices

    async def start(self, first: UserInput) -> None:
        """Emit SessionStarted with the system prompt (built for the first instruction)."""
        if self.messages:
            return
        prompt = await asyncio.to_thread(self._system_prompt, first)
        instructions: Found = await asyncio.to_thread(self.instructions.at_start)
        block = await asyncio.to_thread(self.feed.session_block, first)
        prompt += instructions.text(start=True) + (block.text if block else "")
        held: list[Event] = []  # the hooks' events follow SessionStarted, the session's first
        if self.hooks.wants("SessionStart", "startup"):
            verdict = await self.hooks.run("SessionStart", {"source": "startup"}, subject="startup", held=held)
            prompt += f"\n\n{verdict.context}" if verdict.context else ""
        self.messages.append({"role": "system", "content": prompt})
        started = self.emit(
            SessionStarted(
                session_id=self.id,
                workspace=str(self.workspace.root),
                model=self.model.name,
                frontend=self.frontend,
                system_prompt=prompt,
                tools=self.toolbox.schemas(),
                git_head=self.git_head,
                repository=self.repository,
                config=settings_dict(self.settings),
            )
        )
        self.feed.show(block, "session_start", started.id)
        self.calls.notify(instructions, started.id)
        for event in held:
            self.emit(event)


def _user_content(op: UserInput) -> str:
    if not op.context:
        return op.text
    refs = []
    for ref in op.context:
        span = f" lines {ref.start_line}-{ref.end_line}" if ref.start_line else ""
        refs.append(f"- {ref.path}{span}" + (f": {ref.note}" if ref.note else ""))
    return f"{op.text}\n\nContext:\n" + "\n".join(refs)
