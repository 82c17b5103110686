"""What becomes of one call of the model's: the one path a session and state replay share, so that
a replayed sample is labelled by the code that ran the recorded call.

A call is prepared (its tool exists, its arguments match the schema), answered unrun where its
result is already known (the repeated-call and cycle guards, a known failure), judged by the
approval policy, run, and its changes written to the workspace. What happens around that differs:
a session asks its user, keeps a checkpoint and records each edit (`CallHooks`); a replay runs
unattended (`UNATTENDED`), as a headless session that nobody answers."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from agent.approval import UNANSWERED, ApprovalPolicy
from agent.exits import LoopExit
from agent.loop_guard import LoopGuard, call_key
from agent.protocol import Lesson
from agent.protocol.arguments import Arguments
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


class CallHooks(Protocol):
    """What the caller does around one call's result."""

    async def ask(self, action: str, summary: str, detail: str) -> str | None:
        """Ask about a command, an MCP call or an edit: None when approved, else the refusal the model reads."""
        ...

    async def write(self, change: FileChange, write: Callable[[], None]) -> None:
        """Write one change by calling `write` (it raises WorkspaceError or OSError when it cannot)."""
        ...

    def written(self, change: FileChange, broken: str | None) -> None:
        """A change is in the workspace; `broken` is the syntax error it left, if any."""
        ...

    def crashed(self, name: str, detail: str) -> None:
        """A tool raised instead of returning an error result (a teachback bug)."""
        ...


def declined(action: str, comment: str | None) -> str:
    """The refusal the model reads when its call was asked about and declined. The reason is the
    user's own words: it gets the full stop they may have left off."""
    comment = (comment or "").strip()
    reason = f" Their reason: {comment}{'' if comment.endswith(('.', '!', '?')) else '.'}" if comment else ""
    return f"The user declined this {action}; nothing was changed.{reason} Adjust your approach accordingly."


class Unattended:
    """The hooks of a run nobody watches: an approval request is declined as a headless session
    declines one that nobody answers, and nothing is recorded."""

    async def ask(self, action: str, summary: str, detail: str) -> str | None:
        return declined(action, UNANSWERED)

    async def write(self, change: FileChange, write: Callable[[], None]) -> None:
        await asyncio.to_thread(write)

    def written(self, change: FileChange, broken: str | None) -> None:
        return None

    def crashed(self, name: str, detail: str) -> None:
        return None


UNATTENDED = Unattended()


class CallPath:
    """Decides the results of one session's calls (or one replayed reply's) on `context`'s workspace."""

    def __init__(
        self,
        context: ToolContext,
        policy: ApprovalPolicy,
        guard: LoopGuard,
        *,
        known_failure: Callable[[str, str | None], Lesson | None] | None = None,
        interruptible: Callable[[Awaitable[Any], float], Awaitable[Any]] | None = None,
    ) -> None:
        self.context = context
        self.policy = policy
        self.guard = guard
        self.known_failure = known_failure
        self.interruptible = interruptible

    async def result(
        self, prepared: PreparedCall | ToolResult, hooks: CallHooks, deadline: float = float("inf")
    ) -> ToolResult:
        """The result of a prepared call (a schema error is its own result). A LoopExit raised while
        it runs (the turn was stopped) passes through."""
        edits = self.guard.edits
        if isinstance(prepared, ToolResult):
            result, key, target = prepared, None, None
        else:
            key, target = prepared.key, prepared.target
            answer = self._answer_unrun(prepared)
            result = answer if answer is not None else await self._run(prepared, hooks, deadline)
        self.guard.cycles.note(key, not result.ok, edits)
        result.target = result.target or target  # a tool may give its target's resolved form (a relative path)
        return result

    def _answer_unrun(self, call: PreparedCall) -> ToolResult | None:
        """The answer to a call whose result is known without running it (a loop guard's, or a known
        failure's), or None: run it."""
        name, target = call.tool.name, call.target
        answer = self.guard.check(name, call.kwargs, target)
        if answer is None and self.known_failure is not None and (known := self.known_failure(name, target)):
            answer = error(
                f"Not run: {name} on {target} failed before in this repository because it does not exist, "
                f"and it still does not. {known.text}",
                "not_found",
                target=target,
            )
        return answer

    async def _run(self, call: PreparedCall, hooks: CallHooks, deadline: float) -> ToolResult:
        try:
            return await self._execute(call, hooks, deadline)
        except LoopExit:
            raise
        except Exception as exc:  # no input may end the turn: the model reads what went wrong
            log.exception("tool %s raised", call.tool.name)
            detail = clip(f"{type(exc).__name__}: {exc}", 300, "...")
            hooks.crashed(call.tool.name, detail)
            return error(
                f"{call.tool.name} failed inside teachback ({detail}). This is a fault in the tool, not in the "
                "form of your call. Check with read_file or session_diff what it changed, if anything, then "
                "reach the goal another way (other arguments or another tool).",
                "failed",
            )

    async def _execute(self, call: PreparedCall, hooks: CallHooks, deadline: float) -> ToolResult:
        tool, kwargs, target = call.tool, call.kwargs, call.target
        command = tool.roles.command_of(kwargs) or ""
        verdict = self.policy.decide(tool.action, command, tool.name)
        if verdict == "deny":
            return error(self.policy.refusal(tool.action, tool.name), "denied", target=target)
        if verdict == "ask" and tool.action in ("command", "call"):
            asked = (
                ("command", f"Run `{command}`", command)
                if tool.action == "command"
                else _call_approval(tool.name, kwargs)
            )
            refusal = await hooks.ask(*asked)
            if refusal is not None:
                return error(refusal, "denied", target=target)
        if tool.is_async and self.interruptible is not None:
            result = await self.interruptible(tool.fn(self.context, **kwargs), deadline)
        elif tool.is_async:
            result = await tool.fn(self.context, **kwargs)
        else:
            result = await asyncio.to_thread(tool.fn, self.context, **kwargs)
        if result.changes:
            if verdict == "ask":
                diff = "".join(unified_diff(c.path, c.before, c.after, new_rel=c.new_path) for c in result.changes)
                summary = ", ".join(f"{c.kind} {c.path}" for c in result.changes)
                refusal = await hooks.ask("edit", summary, diff)
                if refusal is not None:
                    return error(refusal, "denied", target=result.target)
            await self._apply(result, hooks)
        return result

    async def _apply(self, result: ToolResult, hooks: CallHooks) -> None:
        problems = []
        for change in result.changes:
            try:
                await hooks.write(change, lambda change=change: self._write(change))
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
            broken = syntax_error(change.new_path or change.path, change.after) if change.after is not None else None
            if broken:
                problems.append(broken)
            hooks.written(change, broken)
            self.guard.edit_applied()
        if problems:
            result.output += (
                "\nThe edit was applied, but the file no longer parses:\n"
                + "\n".join(problems)
                + "\nFix it with another edit_file call (the change above is already in the file)."
            )

    def _write(self, change: FileChange) -> None:
        self.context.changes.note(change)
        self.context.workspace.write(change)


def _call_approval(name: str, kwargs: dict[str, Any]) -> tuple[str, str, str]:
    """An MCP call as its approval request shows it: the tool and its arguments on one line (what an
    editor's prompt shows), and the arguments laid out (what a terminal or dialog shows)."""
    line, whole = json.dumps(kwargs, ensure_ascii=False), json.dumps(kwargs, indent=2, ensure_ascii=False)
    summary = f"{name} {line if len(line) <= 200 else line[:197] + '...'}"
    return "call", summary, whole if len(whole) <= MAX_SHOWN_ARGUMENTS else whole[:MAX_SHOWN_ARGUMENTS] + "..."
