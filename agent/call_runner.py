"""Running one tool call of the model's, a part the session owns: prepare its arguments, answer it
from the loop guards or a known failure, ask the approval policy (and the user), execute it, apply
its edits, and finish it with the message the model reads and the events the store records."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agent.approval import ApprovalPolicy
from agent.checkpoint import Checkpoint
from agent.exits import LoopExit
from agent.lesson_feed import LessonFeed
from agent.loop_guard import LoopGuard, call_key
from agent.protocol import (
    ApprovalDecision,
    ApprovalRequested,
    ApprovalResolved,
    EditApplied,
    ErrorEvent,
    Event,
    ToolCallFinished,
    ToolCallStarted,
    new_id,
)
from agent.protocol.arguments import Arguments, read_arguments
from agent.syntax import syntax_error
from agent.toolkit import ModelTool, Toolbox, ToolResult, error
from agent.tools.context import ToolContext
from agent.workspace import FileChange, WorkspaceError
from common.diffs import unified_diff
from common.text import clip

log = logging.getLogger(__name__)
MAX_SHOWN_ARGUMENTS = 4_000  # of an MCP call's arguments, in its approval request


@dataclass(frozen=True)
class PreparedCall:
    """A call to a tool that exists, with arguments that match its schema, and what it names."""

    tool: ModelTool
    kwargs: dict[str, Any]
    target: str | None  # the path, command or pattern the arguments name

    @property
    def key(self) -> tuple[str, str]:
        return call_key(self.tool.name, self.kwargs)


def prepare(toolbox: Toolbox, name: str, read: Arguments) -> PreparedCall | ToolResult:
    """The call ready to run, or the schema-error result the model reads instead."""
    prepared = toolbox.prepare(name, read)
    if isinstance(prepared, ToolResult):
        return prepared
    tool, kwargs = prepared
    return PreparedCall(tool, kwargs, tool.roles.target_of(kwargs))


class CallRunner:
    """Runs the model's tool calls for a session: `run` one call, `skip` calls that will not run,
    `reject_reply` a reply that could not be read as a call. The approvals it waits for are
    answered through `decide`."""

    def __init__(
        self,
        *,
        session_id: str,
        context: ToolContext,
        policy: ApprovalPolicy,
        messages: list[dict[str, Any]],
        guard: LoopGuard,
        feed: LessonFeed,
        emit: Callable[[Event], Event],
        interruptible: Callable[[Awaitable[Any], float], Awaitable[Any]],
    ) -> None:
        self.id = session_id
        self.context = context
        self.workspace = context.workspace
        self.policy = policy
        self.messages = messages
        self.guard = guard
        self.feed = feed
        self.emit = emit
        self.interruptible = interruptible
        self.turn = 0
        self._pending: dict[str, asyncio.Future[ApprovalDecision]] = {}
        self._checkpoint: Checkpoint | None = None

    def start_turn(self, turn: int) -> None:
        self.turn = turn
        self._checkpoint = None

    async def decide(self, op: ApprovalDecision) -> None:
        """Answer the approval request the running turn waits on."""
        future = self._pending.get(op.request_id)
        if future is None or future.done():
            raise KeyError(f"no pending approval request {op.request_id!r}")
        future.set_result(op)

    def decline_all(self, comment: str) -> None:
        for future in self._pending.values():
            if not future.done():
                future.set_result(ApprovalDecision(request_id="", approved=False, comment=comment))

    async def run(self, call: dict[str, Any], toolbox: Toolbox, step: int, cause: str, deadline: float) -> ToolResult:
        """Run one of the model's calls, or answer it without running it, and finish it."""
        call_id, name = call["id"], call["function"]["name"]
        arguments = call["function"].get("arguments") or ""
        clock = time.perf_counter()
        read = read_arguments(arguments)  # the one reading of the model's text; the event carries it
        prepared = prepare(toolbox, name, read)
        roles = toolbox.roles(name)
        target = None if isinstance(prepared, ToolResult) else prepared.target
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
        edits = self.guard.edits
        if isinstance(prepared, ToolResult):
            result = prepared
        elif (answer := self._answer_unrun(prepared)) is not None:
            result = answer
        else:
            try:
                result = await self._execute(prepared, call_id, started.id, deadline)
            except LoopExit as exit_:  # stopped mid-call: the call still gets its result message
                stopped = error(f"Stopped before this call completed: {exit_.summary}", "interrupted")
                self.finish(call_id, name, stopped, step, started.id, (time.perf_counter() - clock) * 1000)
                raise
            except Exception as exc:  # no input may end the turn: the model reads what went wrong
                result = self._tool_crashed(name, exc, started.id)
        self.guard.cycles.note(None if isinstance(prepared, ToolResult) else prepared.key, not result.ok, edits)
        result.target = result.target or target  # a tool may give its target's resolved form (a relative path)
        self.finish(call_id, name, result, step, started.id, (time.perf_counter() - clock) * 1000, arguments)
        return result

    def _answer_unrun(self, call: PreparedCall) -> ToolResult | None:
        """The answer to a call whose result is known without running it (a loop guard's, or a known
        failure's), or None: run it."""
        name, target = call.tool.name, call.target
        answer = self.guard.check(name, call.kwargs, target)
        if answer is None and (known := self.feed.known_failure(name, target)) is not None:
            answer = error(
                f"Not run: {name} on {target} failed before in this repository because it does not exist, "
                f"and it still does not. {known.text}",
                "not_found",
                target=target,
            )
        return answer

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

    async def _execute(self, call: PreparedCall, call_id: str, cause: str, deadline: float) -> ToolResult:
        tool, kwargs, target = call.tool, call.kwargs, call.target
        command = tool.roles.command_of(kwargs) or ""
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
            result = await self.interruptible(tool.fn(self.context, **kwargs), deadline)
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
            decision = await self.interruptible(future, float("inf"))
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
        comment = (decision.comment or "").strip()
        # The reason is the user's own words: it gets the full stop they may have left off.
        reason = f" Their reason: {comment}{'' if comment.endswith(('.', '!', '?')) else '.'}" if comment else ""
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
            self.guard.edit_applied()
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

    def finish(
        self, call_id: str, name: str, result: ToolResult, step: int, cause: str, ms: float, arguments: str = ""
    ) -> None:
        lessons = self.feed.for_failure(name, arguments, result)
        # The message carries the lessons; `result` stays the tool's own text (the pair's feedback).
        content = result.output + lessons.text if lessons else result.output
        message = {"role": "tool", "tool_call_id": call_id, "content": content}
        self.messages.append(message)
        finished = self.emit(
            ToolCallFinished.from_result(
                result,
                session_id=self.id,
                cause_id=cause,
                call_id=call_id,
                name=name,
                step=step,
                duration_ms=ms,
                message=message,
            )
        )
        self.feed.show(lessons, "tool_result", finished.id, call_id)

    def skip(self, calls: list[dict[str, Any]], step: int, cause: str) -> None:
        # Every tool call needs a result, or the next request is malformed for most providers.
        for call in calls:
            self.finish(
                call["id"],
                call["function"]["name"],
                error("Interrupted by the user before this call ran.", "interrupted"),
                step,
                cause,
                0.0,
            )

    def reject_reply(self, feedback: str, step: int, cause: str) -> None:
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


def _call_approval(name: str, kwargs: dict[str, Any]) -> tuple[str, str]:
    """An MCP call as its approval request shows it: the tool and its arguments on one line (what an
    editor's prompt shows), and the arguments laid out (what a terminal or dialog shows)."""
    line, whole = json.dumps(kwargs, ensure_ascii=False), json.dumps(kwargs, indent=2, ensure_ascii=False)
    summary = f"{name} {line if len(line) <= 200 else line[:197] + '...'}"
    return summary, whole if len(whole) <= MAX_SHOWN_ARGUMENTS else whole[:MAX_SHOWN_ARGUMENTS] + "..."
