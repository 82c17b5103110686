"""The session loop: ask the model with the tool schemas, run each tool call, append the results,
repeat until the model answers without a call or calls `finish`, or a limit stops it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agent.approval import ApprovalPolicy
from agent.call_runner import CallRunner
from agent.config import settings_dict
from agent.exits import Answered, Finished, Interrupted, LimitExceeded, LoopExit, ModelFailed, Refused
from agent.interfaces import LessonSource, Model
from agent.lesson_feed import LessonFeed
from agent.loop_guard import MAX_REPEATS, LoopGuard
from agent.model import ModelError
from agent.protocol import (
    ApprovalDecision,
    AssistantDelta,
    AssistantMessage,
    CorrectEdit,
    ErrorEvent,
    Event,
    Interrupt,
    ModelUsage,
    Op,
    ReviewEdit,
    ReviewFile,
    SessionStarted,
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
T = TypeVar("T")


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
        self._subscribers: list[Callable[[Event], None]] = []
        self._interrupt = asyncio.Event()
        self.guard = LoopGuard()
        self._running = False
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
        self.calls = CallRunner(
            session_id=self.id,
            context=context,
            policy=self.policy,
            messages=self.messages,
            guard=self.guard,
            feed=self.feed,
            emit=self.emit,
            interruptible=self._interruptible,
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
        }

    # -- protocol -----------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    def last_turn_changes(self) -> list[FileChange]:
        return self.review.last_turn_changes()

    def emit(self, event: Event) -> Event:
        for callback in list(self._subscribers):
            try:
                callback(event)
            except Exception as exc:  # one broken subscriber must not stop the agent or the others
                log.warning("a listener failed on %s: %r (run with -v for details)", event.type, exc)
                log.debug("event subscriber %r failed on %s", callback, event.type, exc_info=True)
                if not isinstance(event, ErrorEvent):
                    self.emit(
                        ErrorEvent(
                            session_id=self.id,
                            cause_id=event.id,
                            kind="subscriber",
                            message=f"A listener failed while handling {event.type}; see the log.",
                        )
                    )
        return event

    async def submit(self, op: Op) -> Event | None:
        """Serve `op`; its reply is the event it ended with (a turn's TurnFinished, a review's
        EditReviewed, an undo's TurnUndone), or None for an op that only steers (an approval, an
        interrupt, a correction that matches the agent's version)."""
        serve = self._ops.get(type(op))
        if serve is None:
            raise ValueError(f"a session does not serve {op.type} ops")
        return await serve(op)

    def interrupt(self) -> None:
        self._interrupt.set()

    async def _interrupted(self, op: Interrupt) -> None:
        self.interrupt()

    async def close(self) -> None:
        """Stop a running turn at its next step, decline pending approvals, drop subscribers, stop
        the MCP servers."""
        self.interrupt()
        self.calls.decline_all("The session was closed.")
        self._subscribers.clear()
        if self.tool_servers is not None:
            await self.tool_servers.close()

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
        block = await asyncio.to_thread(self.feed.session_block, first)
        prompt += block.text if block else ""
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

    # -- the loop -----------------------------------------------------------------------------

    async def run(self, op: UserInput) -> TurnFinished:
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
        self.turn += 1
        self._interrupt.clear()
        self.calls.start_turn(self.turn)
        self.guard.start_turn()
        self.context.changes.start_turn()
        message = {"role": "user", "content": _user_content(op)}
        self.messages.append(message)
        started = self.emit(
            TurnStarted(
                session_id=self.id,
                cause_id=op.id,
                turn=self.turn,
                text=op.text,
                message=message,
                context=[_plain(c) for c in op.context],
            )
        )
        totals = {"steps": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
        deadline = time.monotonic() + self.settings.max_time
        try:
            while True:
                self._check_limits(totals, deadline)
                totals["steps"] += 1
                await self._step(totals, deadline, started.id)
        except LoopExit as exit_:
            reason, summary = exit_.reason, exit_.summary
        except Exception as exc:  # a bug must still end the turn visibly, with the log to look at
            log.exception("turn %d of session %s failed", self.turn, self.id)
            reason, summary = "error", f"teachback failed unexpectedly: {exc!r} (details in the log)"
            self.emit(ErrorEvent(session_id=self.id, cause_id=started.id, kind="internal", message=summary))
        finally:
            self._running = False
        return self.emit(
            TurnFinished(
                session_id=self.id, cause_id=started.id, turn=self.turn, reason=reason, summary=summary, **totals
            )
        )

    def _check_limits(self, totals: dict[str, Any], deadline: float) -> None:
        if self._interrupt.is_set():
            raise Interrupted("Interrupted by the user.")
        if totals["steps"] >= self.settings.max_steps:
            raise LimitExceeded("max_steps", f"Stopped after {totals['steps']} steps (max_steps).")
        if self.settings.max_cost and totals["cost_usd"] >= self.settings.max_cost:
            raise LimitExceeded(
                "max_cost", f"Stopped at ${totals['cost_usd']:.4f} (max_cost ${self.settings.max_cost})."
            )
        if time.monotonic() >= deadline:
            raise LimitExceeded("max_time", f"Stopped after {self.settings.max_time:g} s (max_time).")

    async def _step(self, totals: dict[str, Any], deadline: float, cause: str) -> None:
        step = totals["steps"]
        self.guard.start_step()
        on_delta = lambda text: self.emit(AssistantDelta(session_id=self.id, cause_id=cause, text=text))  # noqa: E731
        try:
            reply = await self._interruptible(
                self.model.complete(self.messages, self.toolbox.schemas(), on_delta), deadline
            )
        except ModelError as exc:
            self.emit(ErrorEvent(session_id=self.id, cause_id=cause, kind=exc.kind, message=str(exc)))
            raise ModelFailed(str(exc)) from exc
        self.messages.append(reply.message)
        said = self.emit(AssistantMessage(session_id=self.id, cause_id=cause, step=step, message=reply.message))
        self.emit(
            ModelUsage(
                session_id=self.id,
                cause_id=said.id,
                model=self.model.name,
                step=step,
                prompt_tokens=reply.prompt_tokens,
                completion_tokens=reply.completion_tokens,
                cost_usd=reply.cost_usd,
                latency_ms=reply.latency_ms,
                attempts=reply.attempts,
                logprobs=reply.logprobs,
                tool_mode=reply.tool_mode,
                rendered_messages=reply.rendered_messages,
                prompt_token_ids=reply.prompt_token_ids,
                completion_token_ids=reply.completion_token_ids,
            )
        )
        totals["prompt_tokens"] += reply.prompt_tokens
        totals["completion_tokens"] += reply.completion_tokens
        totals["cost_usd"] += reply.cost_usd
        if reply.format_error:
            self.calls.reject_reply(reply.format_error, step, said.id)
            return
        if not reply.tool_calls:
            self._check_cut(reply.finish_reason)
            raise Answered(reply.message.get("content") or "")
        finished: str | None = None
        for index, call in enumerate(reply.tool_calls):
            if self._interrupt.is_set():
                self.calls.skip(reply.tool_calls[index:], step, said.id)
                raise Interrupted("Interrupted by the user.")
            try:
                result = await self.calls.run(call, self.toolbox, step, said.id, deadline)
            except LoopExit:
                self.calls.skip(reply.tool_calls[index + 1 :], step, said.id)
                raise
            if call["function"]["name"] == "finish" and result.ok:
                finished = result.output
            if self.guard.stuck(result.error_kind):
                self.calls.skip(reply.tool_calls[index + 1 :], step, said.id)
                raise LimitExceeded("stuck", _stuck_summary(result.error_kind))
        if finished is not None:
            raise Finished(finished)

    def _check_cut(self, finish_reason: str | None) -> None:
        """A reply without a call that the model did not end itself: cut at its token limit, or
        refused (the provider's content filter included)."""
        if finish_reason == "length":
            limit = f"max_tokens = {self.settings.max_tokens}" if self.settings.max_tokens else "the provider's limit"
            raise LimitExceeded(
                "max_tokens",
                f"Stopped: the model's reply reached its token limit ({limit}) before it ended. Raise max_tokens "
                "(TEACHBACK_MAX_TOKENS), or ask for a smaller step.",
            )
        if finish_reason in ("content_filter", "refusal"):
            raise Refused("The model declined to answer.")

    async def _interruptible(self, awaitable: Awaitable[T], deadline: float) -> T:
        """Await `awaitable` unless the user interrupts or the turn's time runs out first."""
        task = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(self._interrupt.wait())
        try:
            done, _ = await asyncio.wait(
                {task, stop}, timeout=max(0.0, deadline - time.monotonic()), return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stop.cancel()
        if task in done:
            return task.result()
        task.cancel()
        if stop in done:
            raise Interrupted("Interrupted by the user.")
        raise LimitExceeded("max_time", f"Stopped after {self.settings.max_time:g} s (max_time).")


def _stuck_summary(kind: str | None) -> str:
    if kind == "repeated_cycle":
        return f"Stopped: the model went round the same failing calls {MAX_REPEATS} more times after being told."
    return f"Stopped: the model sent the same call {MAX_REPEATS + 1} times in a row."


def _user_content(op: UserInput) -> str:
    if not op.context:
        return op.text
    refs = []
    for ref in op.context:
        span = f" lines {ref.start_line}-{ref.end_line}" if ref.start_line else ""
        refs.append(f"- {ref.path}{span}" + (f": {ref.note}" if ref.note else ""))
    return f"{op.text}\n\nContext:\n" + "\n".join(refs)


def _plain(ref: Any) -> dict[str, Any]:
    return {k: v for k, v in vars(ref).items() if v is not None}
