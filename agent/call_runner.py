"""Running one tool call of the model's, a part the session owns: the call's events around the
shared call path (agent.call_path: prepare, loop guards, approval policy, execute, apply), the
user's answers to its approval requests, the turn's checkpoint before its first edit, each edit
recorded, and the call finished with the message the model reads."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from agent.approval import ApprovalPolicy
from agent.call_path import CallPath, declined, prepare
from agent.checkpoint import Checkpoint
from agent.exits import LoopExit
from agent.hooks.runner import Hooks
from agent.instructions import Found, ProjectInstructions, paths_named
from agent.lesson_feed import LessonFeed
from agent.loop_guard import LoopGuard
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
from agent.protocol.arguments import read_arguments
from agent.toolkit import Toolbox, ToolResult, error
from agent.tools.context import ToolContext
from agent.workspace import FileChange
from common.diffs import unified_diff


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
        instructions: ProjectInstructions,
        hooks: Hooks,
        emit: Callable[[Event], Event],
        interruptible: Callable[[Awaitable[Any], float], Awaitable[Any]],
    ) -> None:
        self.id = session_id
        self.context = context
        self.workspace = context.workspace
        self.messages = messages
        self.feed = feed
        self.instructions = instructions
        self.emit = emit
        self.interruptible = interruptible
        self.turn = 0
        self._pending: dict[str, asyncio.Future[ApprovalDecision]] = {}
        self._checkpoint: Checkpoint | None = None
        self.path = CallPath(context, policy, guard, hooks=hooks, interruptible=interruptible)

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
        started_roles = toolbox.roles(name).to_dict()
        started = self.emit(
            ToolCallStarted(
                session_id=self.id,
                cause_id=cause,
                call_id=call_id,
                name=name,
                arguments=arguments,
                step=step,
                target=None if isinstance(prepared, ToolResult) else prepared.target,
                args=read.value,
                args_error=read.problem,
                roles=started_roles,
                shown=toolbox.shown(name, read.value),
            )
        )
        try:
            result = await self.path.result(prepared, _Recorded(self, call_id, started.id), deadline, call_id)
        except LoopExit as exit_:  # stopped mid-call: the call still gets its result message
            stopped = error(f"Stopped before this call completed: {exit_.summary}", "interrupted")
            self.finish(
                call_id, name, stopped, step, started.id, (time.perf_counter() - clock) * 1000, roles=started_roles
            )
            raise
        named = paths_named(toolbox.roles(name), read.value)
        ms = (time.perf_counter() - clock) * 1000
        self.finish(call_id, name, result, step, started.id, ms, arguments, named, roles=started_roles)
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
        return None if decision.approved else declined(action, decision.comment)

    async def _checkpoint_before(self, change: FileChange, write: Callable[[], None], cause: str) -> None:
        """Write one change after noting what undo needs (the turn's checkpoint, made before its
        first edit); tell the user when undo will not cover it fully (the turn itself goes on)."""
        if self._checkpoint is None:
            self._checkpoint = Checkpoint(self.workspace.root, self.id, self.turn)
            await asyncio.to_thread(self._checkpoint.create)
        checkpoint = self._checkpoint

        def noted() -> None:
            checkpoint.note(change.path, change.before)
            if change.new_path:
                checkpoint.note(change.new_path, None)
            write()

        try:
            await asyncio.to_thread(noted)
        finally:
            for problem in checkpoint.take_problems():
                self.emit(ErrorEvent(session_id=self.id, cause_id=cause, kind="checkpoint", message=problem))

    def _edit_applied(self, change: FileChange, broken: str | None, call_id: str, cause: str) -> None:
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

    def finish(
        self,
        call_id: str,
        name: str,
        result: ToolResult,
        step: int,
        cause: str,
        ms: float,
        arguments: str = "",
        paths: list[str] | None = None,
        roles: dict[str, Any] | None = None,
    ) -> None:
        """End a call with the message the model reads; `paths` (those the call named) bring the
        project instructions of their folders not shown yet; `roles` are its tool's, as the call's
        start carried them."""
        lessons = self.feed.for_failure(name, arguments, result)
        found = self.instructions.for_paths(paths or ())
        # The message carries the lessons and instructions; `result` stays the tool's own text (the
        # pair's feedback).
        content = result.output + (lessons.text if lessons else "") + found.text(start=False)
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
                roles=roles,
            )
        )
        self.feed.show(lessons, "tool_result", finished.id, call_id)
        self.notify(found, finished.id)

    def notify(self, found: Found, cause: str) -> None:
        """Tell the user about each instructions file left out (the model is not told)."""
        for notice in found.notices:
            self.emit(ErrorEvent(session_id=self.id, cause_id=cause, kind="instructions", message=notice))

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


class _Recorded:
    """The session's hooks around one call's result (agent.call_path.CallHooks): approvals asked of
    the user, edits checkpointed and recorded, a tool's crash reported."""

    def __init__(self, runner: CallRunner, call_id: str, cause: str) -> None:
        self.runner, self.call_id, self.cause = runner, call_id, cause

    async def ask(self, action: str, summary: str, detail: str) -> str | None:
        return await self.runner._ask(self.call_id, self.cause, action, summary, detail)

    async def write(self, change: FileChange, write: Callable[[], None]) -> None:
        await self.runner._checkpoint_before(change, write, self.cause)

    def written(self, change: FileChange, broken: str | None) -> None:
        self.runner._edit_applied(change, broken, self.call_id, self.cause)

    def crashed(self, name: str, detail: str) -> None:
        message = f"The {name} tool failed unexpectedly ({detail}); details in the log."
        self.runner.emit(ErrorEvent(session_id=self.runner.id, cause_id=self.cause, kind="internal", message=message))
