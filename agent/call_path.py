"""What becomes of one call of the model's: the one path a session and state replay share, so that
a replayed sample is labelled by the code that ran the recorded call.

A call is prepared (its tool exists, its arguments match the schema), answered unrun where its
result is already known (the repeated-call and cycle guards), put to the PreToolUse hooks (the
built-in lessons guard answers a known failure; a command hook may allow, deny, ask or rewrite it),
judged by the approval policy (PermissionRequest hooks answer before the user is asked), run, its
changes written to the workspace, and shown to the PostToolUse (or PostToolUseFailure) hooks. What
happens around that differs: a session asks its user, keeps a checkpoint and records each edit
(`CallHooks`); a replay runs unattended (`UNATTENDED`), as a headless session that nobody answers."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from agent.approval import UNANSWERED, ApprovalPolicy
from agent.exits import Blocked, LoopExit
from agent.hooks.runner import Hooks
from agent.hooks.verdicts import Verdict
from agent.loop_guard import LoopGuard, call_key
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
        hooks: Hooks | None = None,
        interruptible: Callable[[Awaitable[Any], float], Awaitable[Any]] | None = None,
    ) -> None:
        self.context = context
        self.policy = policy
        self.guard = guard
        self.hooks = hooks
        self.interruptible = interruptible

    async def result(
        self, prepared: PreparedCall | ToolResult, hooks: CallHooks, deadline: float = float("inf"), call_id: str = ""
    ) -> ToolResult:
        """The result of a prepared call (a schema error is its own result). A LoopExit raised while
        it runs (the turn was stopped, by the user or a hook) passes through."""
        edits = self.guard.edits
        if isinstance(prepared, ToolResult):
            result, key, target = prepared, None, None
        else:
            key, target = prepared.key, prepared.target
            answer = self.guard.check(prepared.tool.name, prepared.kwargs, target)
            result = answer if answer is not None else await self._hooked(prepared, hooks, deadline, call_id)
        self.guard.cycles.note(key, not result.ok, edits)
        result.target = result.target or target  # a tool may give its target's resolved form (a relative path)
        return result

    async def _hooked(self, call: PreparedCall, hooks: CallHooks, deadline: float, call_id: str) -> ToolResult:
        """The call put to its PreToolUse hooks, run as they decide, and its result to the PostToolUse
        (or PostToolUseFailure) hooks."""
        before = await self._tool_hooks("PreToolUse", call, call_id)
        if before.decision == "deny":
            text = before.reason if before.error_kind != "denied" else blocked(call.tool.name, before.reason)
            return error(text, before.error_kind, target=call.target)
        if before.updated_input is not None:
            rewritten = rewrite(call, before.updated_input)
            if isinstance(rewritten, ToolResult):
                return rewritten
            call = rewritten
        result = await self._run(call, hooks, deadline, before.decision, call_id)
        after = await self._tool_hooks(
            "PostToolUse" if result.ok else "PostToolUseFailure", call, call_id, _response(result)
        )
        said = "\n".join(t for t in (before.context, after.context) if t)
        if said:
            result.output += f"\n\nHooks add:\n{said}"
        return result

    async def _tool_hooks(
        self, event: str, call: PreparedCall, call_id: str, more: dict[str, Any] | None = None
    ) -> Verdict:
        if self.hooks is None or not self.hooks.wants(event, call.tool.name):
            return Verdict()
        payload = {"tool_name": call.tool.name, "tool_input": call.kwargs, "tool_use_id": call_id, **(more or {})}
        verdict = await self.hooks.run(event, payload, subject=call.tool.name, target=call.target, call_id=call_id)
        if verdict.stop is not None:
            raise Blocked(verdict.stop)
        return verdict

    async def _ask(
        self, call: PreparedCall, hooks: CallHooks, call_id: str, action: str, summary: str, detail: str
    ) -> str | None:
        """Ask about a call (None: approved, else the refusal the model reads): the PermissionRequest
        hooks answer first, and the user is asked only when none of them decides."""
        verdict = await self._tool_hooks("PermissionRequest", call, call_id)
        if verdict.decision == "deny":
            return blocked(call.tool.name, verdict.reason)
        if verdict.decision == "allow":
            return None
        return await hooks.ask(action, summary, detail)

    async def _run(
        self, call: PreparedCall, hooks: CallHooks, deadline: float, decided: str | None, call_id: str
    ) -> ToolResult:
        try:
            return await self._execute(call, hooks, deadline, decided, call_id)
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

    async def _execute(
        self, call: PreparedCall, hooks: CallHooks, deadline: float, decided: str | None, call_id: str
    ) -> ToolResult:
        """Run a call the approval policy allows. A PreToolUse hook's allow skips asking (the policy's
        deny still refuses); its ask asks even where the policy would not."""
        tool, kwargs, target = call.tool, call.kwargs, call.target
        command = tool.roles.command_of(kwargs) or ""
        verdict = self.policy.decide(tool.action, command, tool.name)
        if verdict == "deny":
            return error(self.policy.refusal(tool.action, tool.name), "denied", target=target)
        if decided in ("allow", "ask"):
            verdict = decided
        if verdict == "ask" and tool.action != "edit":
            asked = (
                ("command", f"Run `{command}`", command)
                if tool.action == "command"
                else _call_approval(tool.name, kwargs)
            )
            refusal = await self._ask(call, hooks, call_id, *asked)
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
                refusal = await self._ask(call, hooks, call_id, "edit", summary, diff)
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


def blocked(name: str, reason: str) -> str:
    """The refusal the model reads when a hook blocked its call: the hook's own reason is the feedback."""
    why = reason.strip() or "(it gave no reason)"
    return f"A hook blocked this {name} call; nothing was run. The hook's reason: {why}"


def rewrite(call: PreparedCall, arguments: Any) -> PreparedCall | ToolResult:
    """The call with the arguments a hook rewrote it to, checked against the tool's schema like any
    call; a rewrite that does not fit is a tool error (nothing runs)."""
    problems = call.tool.check(arguments) if isinstance(arguments, dict) else ["they are not a JSON object"]
    if problems:
        return error(
            f"A hook rewrote this {call.tool.name} call to arguments that do not match its schema, so nothing "
            "was run:\n" + "\n".join(f"- {p}" for p in problems) + f"\nExpected: {call.tool.signature_text()}",
            "bad_arguments",
            target=call.target,
        )
    return PreparedCall(call.tool, arguments, call.tool.roles.target_of(arguments))


def _response(result: ToolResult) -> dict[str, Any]:
    """A call's result as its PostToolUse (or PostToolUseFailure) hooks are sent it."""
    if result.ok:
        return {"tool_response": {"output": result.output, "exit_code": result.exit_code}}
    return {"error": result.output, "error_kind": result.error_kind, "is_interrupt": result.error_kind == "interrupted"}


def _call_approval(name: str, kwargs: dict[str, Any]) -> tuple[str, str, str]:
    """An MCP call as its approval request shows it: the tool and its arguments on one line (what an
    editor's prompt shows), and the arguments laid out (what a terminal or dialog shows)."""
    line, whole = json.dumps(kwargs, ensure_ascii=False), json.dumps(kwargs, indent=2, ensure_ascii=False)
    summary = f"{name} {line if len(line) <= 200 else line[:197] + '...'}"
    return "call", summary, whole if len(whole) <= MAX_SHOWN_ARGUMENTS else whole[:MAX_SHOWN_ARGUMENTS] + "..."
