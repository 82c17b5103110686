"""A session's events as ACP `session/update`s: text chunks, tool calls with their kind, locations,
statuses and diffs, usage. Pure: the live turn (acp_server.session) and the replay of a recorded
session (session/load) run the same translation, so a loaded session looks as it did live.

Tool calls are named `t<turn>:<call id>` (models reuse ids across turns; the editor keys on them).
A call's kind, title and locations come from what its tool declares, as its events carry it (how the
call reads to a person, and its roles); a call of the tool that ends the turn is not shown as a
tool call: its summary is the turn's last agent message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import (
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
    update_user_message_text,
)
from acp.helpers import update_current_mode
from acp.schema import Cost, TerminalToolCallContent, ToolCallLocation, UsageUpdate

from agent.protocol import (
    ENDS_TURN,
    ApprovalRequested,
    ApprovalResolved,
    AssistantDelta,
    AssistantMessage,
    EditApplied,
    ErrorEvent,
    Event,
    LessonsShown,
    ModeChanged,
    ModelUsage,
    PlanProposed,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)

PATH_KINDS = ("read", "edit", "delete", "move")  # kinds of call whose target is the file shown
MAX_RESULT_CHARS = 8_000  # of a tool's text shown in the editor (the model got all of it)
# What a turn's end is called in ACP (agent.protocol.FinishReason -> StopReason). An unreachable
# model ("error") is answered as an error instead, with its message.
STOP_REASONS = {
    "finished": "end_turn",
    "answered": "end_turn",
    "max_steps": "max_turn_requests",
    "max_cost": "max_turn_requests",
    "max_time": "max_turn_requests",
    "stuck": "max_turn_requests",
    "interrupted": "cancelled",
    "max_tokens": "max_tokens",
    "refusal": "refusal",
    "blocked": "refusal",
}


def tool_call_id(turn: int, call_id: str) -> str:
    return f"t{turn}:{call_id}"


@dataclass
class Translator:
    """Turns events into updates, in order; keeps what a later event needs (the turn, a call's edits)."""

    root: Path
    context_size: int = 0  # the model's context window in tokens (0: unknown)
    replay: bool = False  # a recorded session (session/load): the user's prompts are said too
    turn: int = 0
    streamed: bool = False  # the step's text already went out as deltas
    cost: float = 0.0
    calls: dict[str, dict[str, Any]] = field(default_factory=dict)  # call id -> title, kind, args
    # call id -> what the call shows before its result: its edits' diffs, the editor's terminal it ran in
    diffs: dict[str, list[Any]] = field(default_factory=dict)

    def updates(self, event: Event) -> list[Any]:
        handler = _HANDLERS.get(type(event))
        return handler(self, event) if handler is not None else []

    def attach_terminal(self, call_id: str, terminal_id: str) -> Any:
        """The call's command runs in the editor's terminal: shown in the call from now on, its result too."""
        self.diffs.setdefault(call_id, []).append(TerminalToolCallContent(type="terminal", terminal_id=terminal_id))
        return update_tool_call(tool_call_id(self.turn, call_id), content=list(self.diffs[call_id]))

    def _turn_started(self, event: TurnStarted) -> list[Any]:
        self.turn = event.turn
        return [update_user_message_text(event.text)] if self.replay else []  # live, the editor shows it

    def _delta(self, event: AssistantDelta) -> list[Any]:
        self.streamed = True
        return [update_agent_message_text(event.text)] if event.text else []

    def _message(self, event: AssistantMessage) -> list[Any]:
        streamed, self.streamed = self.streamed, False
        content = event.message.get("content")
        return [update_agent_message_text(content)] if content and not streamed and isinstance(content, str) else []

    def _usage(self, event: ModelUsage) -> list[Any]:
        """The context the last model call filled, of the model's window (not sent when litellm does
        not know the window: a made-up size would show a wrong fill), and the session's cost."""
        self.cost += event.cost_usd
        if not self.context_size:
            return []
        return [
            UsageUpdate(
                session_update="usage_update",
                used=event.prompt_tokens + event.completion_tokens,
                size=self.context_size,
                cost=Cost(amount=round(self.cost, 6), currency="USD"),
            )
        ]

    def _started(self, event: ToolCallStarted) -> list[Any]:
        shown = _shown(event)
        if shown.get("action") == ENDS_TURN:
            return []
        args = event.args or {}
        title, kind = shown.get("title") or untitled(event.name, event.arguments), shown.get("kind") or "other"
        self.calls[event.call_id] = {"title": title, "kind": kind}
        return [
            start_tool_call(
                tool_call_id(self.turn, event.call_id),
                title,
                kind=kind,
                status="in_progress",
                locations=self._locations(event, shown.get("line")),
                raw_input=args or None,
            )
        ]

    def _resolved(self, event: ApprovalResolved) -> list[Any]:
        if not event.approved or event.call_id not in self.calls:
            return []
        return [update_tool_call(tool_call_id(self.turn, event.call_id), status="in_progress")]

    def _edit(self, event: EditApplied) -> list[Any]:
        path = self.root / (event.new_path or event.path)
        diff = tool_diff_content(str(path), event.after or "", event.before)
        self.diffs.setdefault(event.call_id, []).append(diff)
        return [update_tool_call(tool_call_id(self.turn, event.call_id), content=list(self.diffs[event.call_id]))]

    def _finished(self, event: ToolCallFinished) -> list[Any]:
        if event.call_id not in self.calls:  # a call not shown (one that ends the turn)
            return []
        result = event.result if len(event.result) <= MAX_RESULT_CHARS else event.result[:MAX_RESULT_CHARS] + "\n..."
        content = [*self.diffs.pop(event.call_id, []), tool_content(text_block(_fenced(result)))]
        on_path = event.target and self.calls[event.call_id]["kind"] in PATH_KINDS
        locations = [ToolCallLocation(path=str(self.root / event.target))] if on_path else None
        return [
            update_tool_call(
                tool_call_id(self.turn, event.call_id),
                status="completed" if event.ok else "failed",
                content=content,
                locations=locations,
            )
        ]

    def _turn_finished(self, event: TurnFinished) -> list[Any]:
        self.calls.clear()
        if event.reason == "finished" and event.summary:
            return [update_agent_message_text(event.summary)]
        if event.reason not in ("answered", "finished", "interrupted", "refusal") and event.summary:
            return [update_agent_message_text(f"\n\n{event.summary}")]
        return []

    def _error(self, event: ErrorEvent) -> list[Any]:
        return [update_agent_message_text(f"\n\nteachback: {event.message}\n")]

    def _lessons(self, event: LessonsShown) -> list[Any]:
        return [update_agent_thought_text(f"Lessons from earlier sessions:\n{event.text.strip()}")]

    def _locations(self, event: ToolCallStarted, line: int | None) -> list[ToolCallLocation] | None:
        """The files the call acts on (its target, when a path, then the paths it writes), the
        first at the line the call names."""
        roles, args = event.call_roles, event.args or {}
        names = [roles.target] if roles.target_is_path else []
        names += [name for name in roles.writes if name not in names]
        paths = [value for name in names if isinstance(value := args.get(name), str) and value]
        found = [ToolCallLocation(path=str(self.root / path)) for path in paths]
        if found and line is not None:
            found[0] = ToolCallLocation(path=found[0].path, line=line)
        return found or None


def plan_entries(plan: str) -> list[Any]:
    """A plan's steps as ACP plan entries: its list items, or the whole text as one entry."""
    steps = [m.group(1) for m in re.finditer(r"^\s*(?:[-*+]|\d+[.)])\s+(.+)$", plan, re.MULTILINE)]
    return [plan_entry(step.strip()) for step in steps or [plan.strip()]]


def untitled(name: str, raw: str) -> str:
    """The title of a call whose tool declares none (an MCP server's tool, an unknown name)."""
    if name.startswith("mcp__") and name.count("__") >= 2:
        _, server, tool = name.split("__", 2)
        return f"{server}: {tool}"
    return f"{name}({raw[:80]})" if name else "An unreadable tool call"


def _shown(event: ToolCallStarted) -> dict[str, Any]:
    """How the call reads to a person, as its event carries it (an event recorded before events
    carried it: as its built-in tool declares it)."""
    if event.shown is not None:
        return event.shown
    from agent.tools import shown_for

    return shown_for(event.name, event.args) or {}


def approval_content(request: ApprovalRequested) -> list[Any]:
    """What the editor shows when asked: the diff, the command or an MCP call's arguments."""
    language = {"edit": "diff", "command": "sh"}.get(request.action, "json")
    return [tool_content(text_block(f"```{language}\n{request.detail}\n```"))]


def _fenced(text: str) -> str:
    return f"```\n{text}\n```" if text.strip() else text


_HANDLERS = {
    TurnStarted: Translator._turn_started,
    AssistantDelta: Translator._delta,
    AssistantMessage: Translator._message,
    ModelUsage: Translator._usage,
    ToolCallStarted: Translator._started,
    ApprovalResolved: Translator._resolved,
    EditApplied: Translator._edit,
    ToolCallFinished: Translator._finished,
    TurnFinished: Translator._turn_finished,
    ErrorEvent: Translator._error,
    LessonsShown: Translator._lessons,
    ModeChanged: lambda self, event: [update_current_mode(event.mode)],
    PlanProposed: lambda self, event: [update_plan(plan_entries(event.plan))],
}
