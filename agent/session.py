"""The session loop: ask the model with the tool schemas, run each tool call, append the results,
repeat until the model answers without a call or calls `finish`, or a limit stops it."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agent.approval import ApprovalPolicy
from agent.checkpoint import Checkpoint
from agent.config import settings_dict
from agent.exits import Answered, Finished, Interrupted, LimitExceeded, LoopExit, ModelFailed, Refused
from agent.interfaces import LessonSource, Model
from agent.loop_guard import CycleGuard, call_key, cycle_feedback
from agent.model import ModelError
from agent.protocol import (
    REPEAT_ERRORS,
    ApprovalDecision,
    ApprovalRequested,
    ApprovalResolved,
    AssistantDelta,
    AssistantMessage,
    EditApplied,
    EditReviewed,
    ErrorEvent,
    Event,
    Interrupt,
    Lesson,
    Lessons,
    LessonsShown,
    ModelUsage,
    Op,
    SessionStarted,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
    UserInput,
    new_id,
)
from agent.protocol.arguments import read_arguments
from agent.review import Review
from agent.syntax import syntax_error
from agent.toolkit import ModelTool, Toolbox, ToolResult, ToolServers, error
from agent.tools.context import ToolContext
from agent.workspace import FileChange, WorkspaceError
from common.diffs import unified_diff
from common.text import clip

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_REPEATS = 3  # consecutive repeated calls or cycles, each answered with feedback, before the turn stops
NO_LESSONS = ("interrupted", *REPEAT_ERRORS)  # failures that earlier sessions have nothing to say about
MAX_SHOWN_ARGUMENTS = 4_000  # of an MCP call's arguments, in its approval request


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
        self._pending: dict[str, asyncio.Future[ApprovalDecision]] = {}
        self._interrupt = asyncio.Event()
        self._checkpoint: Checkpoint | None = None
        # (name, canonical arguments) -> edits applied before it, for the previous and current step
        self._previous_calls: dict[tuple[str, str], int] = {}
        self._step_calls: dict[tuple[str, str], int] = {}
        self._edit_count = 0
        self._cycles = CycleGuard()
        self._repeats = 0
        self._running = False
        self.lessons = lessons
        self._lessons_shown: set[str] = set()  # ids shown after failing calls, not shown again
        self.tool_servers = tool_servers  # MCP servers: started before the first turn, their tools added
        self._servers_started = False

    # -- protocol -----------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback) if callback in self._subscribers else None

    # -- review (agent.review.Review does the work) ----------------------------------------------

    def last_turn_changes(self) -> list[FileChange]:
        return self.review.last_turn_changes()

    async def review_file(self, path: str, accepted: bool, comment: str | None = None) -> EditReviewed:
        return await self.review.review_file(path, accepted, comment)

    async def review_edit(self, edit_id: str, accepted: bool, comment: str | None = None) -> EditReviewed:
        return await self.review.review_edit(edit_id, accepted, comment)

    async def record_correction(self, path: str, user_content: str) -> EditReviewed | None:
        return await self.review.record_correction(path, user_content)

    async def undo(self) -> list[str]:
        return await self.review.undo()

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

    async def submit(self, op: Op) -> TurnFinished | None:
        if isinstance(op, UserInput):
            return await self.run(op)
        if isinstance(op, ApprovalDecision):
            future = self._pending.get(op.request_id)
            if future is None or future.done():
                raise KeyError(f"no pending approval request {op.request_id!r}")
            future.set_result(op)
        elif isinstance(op, Interrupt):
            self.interrupt()
        return None

    def interrupt(self) -> None:
        self._interrupt.set()

    async def close(self) -> None:
        """Stop a running turn at its next step, decline pending approvals, drop subscribers, stop
        the MCP servers."""
        self.interrupt()
        for future in self._pending.values():
            if not future.done():
                future.set_result(ApprovalDecision(request_id="", approved=False, comment="The session was closed."))
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
        block = await asyncio.to_thread(self._lessons_block, first)
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
        self._show_lessons(block, "session_start", started.id)

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
        self._checkpoint = None
        self._step_calls = {}  # a new instruction may well need the same call again
        self._cycles.reset()
        self._repeats = 0
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
        self._previous_calls, self._step_calls = self._step_calls, {}
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
            self._reject_reply(reply.format_error, step, said.id)
            return
        if not reply.tool_calls:
            self._check_cut(reply.finish_reason)
            raise Answered(reply.message.get("content") or "")
        finished: str | None = None
        for index, call in enumerate(reply.tool_calls):
            if self._interrupt.is_set():
                self._skip_calls(reply.tool_calls[index:], step, said.id)
                raise Interrupted("Interrupted by the user.")
            try:
                result = await self._run_call(call, step, said.id, deadline)
            except LoopExit:
                self._skip_calls(reply.tool_calls[index + 1 :], step, said.id)
                raise
            if call["function"]["name"] == "finish" and result.ok:
                finished = result.output
            self._repeats = self._repeats + 1 if result.error_kind in REPEAT_ERRORS else 0
            if self._repeats >= MAX_REPEATS:
                self._skip_calls(reply.tool_calls[index + 1 :], step, said.id)
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

    # -- tool calls ---------------------------------------------------------------------------

    async def _run_call(self, call: dict[str, Any], step: int, cause: str, deadline: float) -> ToolResult:
        call_id, name = call["id"], call["function"]["name"]
        arguments = call["function"].get("arguments") or ""
        clock = time.perf_counter()
        read = read_arguments(arguments)  # the one reading of the model's text; the event carries it
        prepared = self.toolbox.prepare(name, read)
        roles = self.toolbox.roles(name)
        target = None if isinstance(prepared, ToolResult) else roles.target_of(prepared[1])
        started = self.emit(
            ToolCallStarted(
                session_id=self.id,
                cause_id=cause,
                call_id=call_id,
                name=name,
                arguments=arguments,
                step=step,
                target=target,
                args=read.value,
                args_error=read.problem,
                roles=roles.to_dict(),
            )
        )
        edits = self._edit_count
        period = (
            None
            if isinstance(prepared, ToolResult) or name == "finish"
            else (self._cycles.period(call_key(name, prepared[1]), edits))
        )
        if isinstance(prepared, ToolResult):
            result = prepared
        elif self._repeats_previous_step(name, prepared[1]):
            result = error(
                f"You made exactly this {name} call in your previous step and nothing has changed since, so "
                "its result (above) would be the same. Do not repeat it: use that result, make a different "
                "call, or call finish if the task is done.",
                "repeated_call",
                target=target,
            )
        elif period is not None:
            result = error(cycle_feedback(name, period), "repeated_cycle", target=target)
        elif (known := self._known_failure(name, target)) is not None:
            result = error(
                f"Not run: {name} on {target} failed before in this repository because it does not exist, "
                f"and it still does not. {known.text}",
                "not_found",
                target=target,
            )
        else:
            tool, kwargs = prepared
            try:
                result = await self._execute(tool, kwargs, call_id, started.id, deadline)
            except LoopExit as exit_:  # stopped mid-call: the call still gets its result message
                stopped = error(f"Stopped before this call completed: {exit_.summary}", "interrupted")
                self._finish_call(call_id, name, stopped, step, started.id, (time.perf_counter() - clock) * 1000)
                raise
            except Exception as exc:  # no input may end the turn: the model reads what went wrong
                result = self._tool_crashed(name, exc, started.id)
        self._cycles.note(
            None if isinstance(prepared, ToolResult) else call_key(name, prepared[1]), not result.ok, edits
        )
        result.target = result.target or target  # a tool may give its target's resolved form (a relative path)
        self._finish_call(call_id, name, result, step, started.id, (time.perf_counter() - clock) * 1000, arguments)
        return result

    def _tool_crashed(self, name: str, exc: Exception, cause: str) -> ToolResult:
        """A tool raised instead of returning an error result: a teachback bug, logged and reported,
        and a result for the model so that the turn goes on."""
        log.exception("tool %s raised", name)
        detail = f"{type(exc).__name__}: {exc}"
        detail = clip(detail, 300, "...")
        self.emit(
            ErrorEvent(
                session_id=self.id,
                cause_id=cause,
                kind="internal",
                message=f"The {name} tool failed unexpectedly ({detail}); details in the log.",
            )
        )
        return error(
            f"{name} failed inside teachback ({detail}). This is a fault in the tool, not in the form of your "
            "call. Check with read_file or session_diff what it changed, if anything, then reach the goal "
            "another way (other arguments or another tool).",
            "failed",
        )

    async def _execute(
        self, tool: ModelTool, kwargs: dict[str, Any], call_id: str, cause: str, deadline: float
    ) -> ToolResult:
        command, target = tool.roles.command_of(kwargs) or "", tool.roles.target_of(kwargs)
        verdict = self.policy.decide(tool.action, command, tool.name)
        if verdict == "deny":
            return error(self.policy.refusal(tool.action, tool.name), "denied", target=target)
        if verdict == "ask" and tool.action == "command":
            refusal = await self._ask(call_id, cause, "command", f"Run `{command}`", command)
            if refusal is not None:
                return error(refusal, "denied", target=target)
        if verdict == "ask" and tool.action == "call":  # a tool from an MCP server
            refusal = await self._ask(call_id, cause, "call", *_call_approval(tool.name, kwargs))
            if refusal is not None:
                return error(refusal, "denied", target=target)
        if tool.is_async:
            result = await self._interruptible(tool.fn(self.context, **kwargs), deadline)
        else:
            result = await asyncio.to_thread(tool.fn, self.context, **kwargs)
        if result.changes:
            if verdict == "ask":
                diff = "".join(unified_diff(c.path, c.before, c.after, new_rel=c.new_path) for c in result.changes)
                summary = ", ".join(f"{c.kind} {c.path}" for c in result.changes)
                refusal = await self._ask(call_id, cause, "edit", summary, diff)
                if refusal is not None:
                    return error(refusal, "denied", target=result.target)
            await self._apply(result, call_id, cause)
        return result

    def _repeats_previous_step(self, name: str, kwargs: dict[str, Any]) -> bool:
        """A model stuck in a loop re-sends its last call; the second copy gets feedback instead."""
        key = call_key(name, kwargs)
        self._step_calls[key] = self._edit_count
        return name != "finish" and self._previous_calls.get(key) == self._edit_count

    async def _ask(self, call_id: str, cause: str, action: str, summary: str, detail: str) -> str | None:
        """Ask the frontend; None when approved, else the refusal text for the model."""
        request_id = new_id()
        future: asyncio.Future[ApprovalDecision] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        requested = self.emit(
            ApprovalRequested(
                session_id=self.id,
                cause_id=cause,
                request_id=request_id,
                call_id=call_id,
                action=action,
                summary=summary,
                detail=detail,
            )
        )
        try:
            decision = await self._interruptible(future, float("inf"))
        finally:
            self._pending.pop(request_id, None)
        self.emit(
            ApprovalResolved(
                session_id=self.id,
                cause_id=requested.id,
                request_id=request_id,
                call_id=call_id,
                approved=decision.approved,
                comment=decision.comment,
            )
        )
        if decision.approved:
            return None
        reason = f" Their reason: {decision.comment}" if decision.comment else ""
        return f"The user declined this {action}; nothing was changed.{reason} Adjust your approach accordingly."

    async def _apply(self, result: ToolResult, call_id: str, cause: str) -> None:
        if self._checkpoint is None:
            self._checkpoint = Checkpoint(self.workspace.root, self.id, self.turn)
            await asyncio.to_thread(self._checkpoint.create)
        problems = []
        for change in result.changes:
            try:
                await asyncio.to_thread(self._write, change)
            except WorkspaceError as exc:  # the path changed under the write: refused, nothing written
                result.output, result.error_kind = f"Could not write {change.new_path or change.path}: {exc}", exc.kind
                return
            except OSError as exc:  # permissions, a full disk: the model is told, nothing escapes
                result.output = (
                    f"Could not write {change.new_path or change.path}: {exc.strerror or exc}. "
                    "The file is unchanged; check its permissions or free space."
                )
                result.error_kind = "failed"
                return
            finally:
                self._report_checkpoint(cause)
            broken = syntax_error(change.new_path or change.path, change.after) if change.after is not None else None
            if broken:
                problems.append(broken)
            edit = self.emit(
                EditApplied(
                    session_id=self.id,
                    cause_id=cause,
                    edit_id=new_id(),
                    call_id=call_id,
                    path=change.path,
                    kind=change.kind,
                    before=change.before,
                    after=change.after,
                    new_path=change.new_path,
                    diff=unified_diff(change.path, change.before, change.after, new_rel=change.new_path),
                    syntax_error=broken,
                )
            )
            self.context.changes.edits.append(edit)  # type: ignore[arg-type]
            self._edit_count += 1
        if problems:
            result.output += (
                "\nThe edit was applied, but the file no longer parses:\n"
                + "\n".join(problems)
                + "\nFix it with another edit_file call (the change above is already in the file)."
            )

    def _report_checkpoint(self, cause: str) -> None:
        """Tell the user when undo will not cover this turn fully (the turn itself goes on)."""
        assert self._checkpoint is not None
        for problem in self._checkpoint.take_problems():
            self.emit(ErrorEvent(session_id=self.id, cause_id=cause, kind="checkpoint", message=problem))

    def _write(self, change: FileChange) -> None:
        assert self._checkpoint is not None
        self._checkpoint.note(change.path, change.before)
        if change.new_path:
            self._checkpoint.note(change.new_path, None)
        self.context.changes.note(change)
        self.workspace.write(change)

    def _finish_call(
        self, call_id: str, name: str, result: ToolResult, step: int, cause: str, ms: float, arguments: str = ""
    ) -> None:
        lessons = self._failure_lessons(name, arguments, result)
        # The message carries the lessons; `result` stays the tool's own text (the pair's feedback).
        content = result.output + lessons.text if lessons else result.output
        message = {"role": "tool", "tool_call_id": call_id, "content": content}
        self.messages.append(message)
        finished = self.emit(
            ToolCallFinished(
                session_id=self.id,
                cause_id=cause,
                call_id=call_id,
                name=name,
                ok=result.ok,
                result=result.output,
                step=step,
                error_kind=result.error_kind,
                target=result.target,
                exit_code=result.exit_code,
                duration_ms=ms,
                message=message,
            )
        )
        self._show_lessons(lessons, "tool_result", finished.id, call_id)

    # -- lessons from earlier sessions --------------------------------------------------------

    def _lessons_block(self, first: UserInput) -> Lessons | None:
        """The start-of-session block, lessons about what the first instruction names first (runs in
        a worker thread, before SessionStarted)."""
        if self.lessons is None or not self.settings.lessons or self.settings.lessons_tokens <= 0:
            return None
        source, focus = self.lessons, " ".join([first.text, *(ref.path for ref in first.context)])
        return self._ask_lessons(
            lambda: source.session_block(
                str(self.workspace.root),
                self.model.name,
                self.settings.lessons_tokens,
                focus,
                repository=self.repository,
            )
        )

    def _known_failure(self, name: str, target: str | None) -> Lesson | None:
        """A lesson of this repository that says this call fails (its path does not exist) and what
        worked instead: the call is answered with it before it runs, a guard like the loop's."""
        if target is None or self.lessons is None or not self.settings.lessons:
            return None
        source = self.lessons
        known = self._ask_lessons(
            lambda: source.known_failure(
                tool=name, target=target, workspace=str(self.workspace.root), repository=self.repository
            )
        )
        if known is not None:
            self._lessons_shown.add(known.id)  # its text is in the answer: not shown again after it
        return known

    def _failure_lessons(self, name: str, arguments: str, result: ToolResult) -> Lessons | None:
        if result.ok or self.lessons is None or not self.settings.lessons or result.error_kind in NO_LESSONS:
            return None
        source = self.lessons
        return self._ask_lessons(
            lambda: source.for_failure(
                tool=name,
                error_kind=result.error_kind,
                target=result.target,
                call=arguments,
                feedback=result.output,
                workspace=str(self.workspace.root),
                repository=self.repository,
                session_id=self.id,
                shown=frozenset(self._lessons_shown),
            )
        )

    def _ask_lessons(self, ask: Callable[[], Lessons]) -> Lessons | None:
        """Lessons help the model; they must never stop it: a failing source is logged and skipped."""
        try:
            return ask()
        except Exception:
            log.exception("reading lessons failed in session %s; going on without them", self.id)
            return None

    def _show_lessons(self, shown: Lessons | None, moment: str, cause: str, call_id: str | None = None) -> None:
        if not shown or not shown.lessons:
            return
        if moment == "tool_result":
            self._lessons_shown.update(lesson.id for lesson in shown.lessons)
        self.emit(
            LessonsShown(
                session_id=self.id,
                cause_id=cause,
                moment=moment,
                call_id=call_id,  # type: ignore[arg-type]
                lessons=[lesson.to_dict() for lesson in shown.lessons],
                text=shown.text,
                tokens=shown.tokens,
            )
        )

    def _skip_calls(self, calls: list[dict[str, Any]], step: int, cause: str) -> None:
        # Every tool call needs a result, or the next request is malformed for most providers.
        for call in calls:
            self._finish_call(
                call["id"],
                call["function"]["name"],
                error("Interrupted by the user before this call ran.", "interrupted"),
                step,
                cause,
                0.0,
            )

    def _reject_reply(self, feedback: str, step: int, cause: str) -> None:
        """A text-mode reply that tried to call a tool but could not be parsed: a schema failure."""
        call_id = f"unparsed_{step}"
        self.emit(
            ToolCallStarted(session_id=self.id, cause_id=cause, call_id=call_id, name="", arguments="", step=step)
        )
        message = {"role": "user", "content": feedback}
        self.messages.append(message)
        self.emit(
            ToolCallFinished(
                session_id=self.id,
                cause_id=cause,
                call_id=call_id,
                name="",
                ok=False,
                result=feedback,
                step=step,
                error_kind="malformed_call",
                message=message,
            )
        )


def _stuck_summary(kind: str | None) -> str:
    if kind == "repeated_cycle":
        return f"Stopped: the model went round the same failing calls {MAX_REPEATS} more times after being told."
    return f"Stopped: the model sent the same call {MAX_REPEATS + 1} times in a row."


def _call_approval(name: str, kwargs: dict[str, Any]) -> tuple[str, str]:
    """An MCP call as its approval request shows it: the tool and its arguments on one line (what an
    editor's prompt shows), and the arguments laid out (what a terminal or dialog shows)."""
    line, whole = json.dumps(kwargs, ensure_ascii=False), json.dumps(kwargs, indent=2, ensure_ascii=False)
    summary = f"{name} {line if len(line) <= 200 else line[:197] + '...'}"
    return summary, whole if len(whole) <= MAX_SHOWN_ARGUMENTS else whole[:MAX_SHOWN_ARGUMENTS] + "..."


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
