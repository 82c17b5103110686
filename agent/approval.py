"""Approval policy: whether an edit, a command or an MCP tool call may run, must be asked about, or
is refused."""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from agent.config import Settings
from agent.protocol import ApprovalDecision, ApprovalRequested, Event

Verdict = Literal["allow", "ask", "deny"]
LOOK_ONLY = ("read-only", "plan")  # modes that refuse edits (and MCP tools no allow_tools rule names)
PLANNED_ACTIONS = {"edit": "edits (writing, deleting or moving files)", "command": "commands", "call": "MCP tools"}
Rules = tuple[str, ...]
# Why a request was declined when nobody answered it (a headless run at the end of its input).
UNANSWERED = (
    "Nobody answered the approval prompt. Run with --approval full-auto (or auto-edit) to allow this without asking."
)


@dataclass(frozen=True)
class ApprovalPolicy:
    """Modes: read-only (no edits, no commands or MCP tool calls unless allowed by a rule), plan (no
    edits and no commands whatever the rules say, MCP tool calls as in read-only: the agent looks and
    plans), ask (ask before edits, commands and MCP tool calls), auto-edit (ask before commands and
    MCP tool calls), full-auto (never ask). Command rules are shell-style globs on the command line, tool rules globs
    on an MCP tool's name (mcp__github__*); deny wins over ask, ask over allow."""

    mode: str = "ask"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()
    allow_tools: tuple[str, ...] = ()
    deny_tools: tuple[str, ...] = ()
    ask_tools: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> ApprovalPolicy:
        return cls(
            settings.approval,
            settings.allow_commands,
            settings.deny_commands,
            settings.ask_commands,
            settings.allow_tools,
            settings.deny_tools,
            settings.ask_tools,
        )

    def decide(self, action: str, command: str | None = None, tool: str | None = None) -> Verdict:
        """The verdict on a call of `action`; `command` is a command's line, `tool` an MCP call's tool."""
        if action in ("read", "finish"):
            return "allow"
        if action == "edit" or (action == "command" and self.mode == "plan"):
            if self.mode in LOOK_ONLY:
                return "deny"
            return "ask" if self.mode == "ask" else "allow"
        if action == "call":
            return self._by_rules(tool or "", self.deny_tools, self.ask_tools, self.allow_tools, _name_matches)
        return self._by_rules((command or "").strip(), self.deny, self.ask, self.allow, _matches)

    def _by_rules(
        self, subject: str, deny: Rules, ask: Rules, allow: Rules, matches: Callable[[str, Rules], bool]
    ) -> Verdict:
        if matches(subject, deny):
            return "deny"
        if matches(subject, ask):
            return "ask"
        if matches(subject, allow):
            return "allow"
        if self.mode in LOOK_ONLY:
            return "deny"
        return "allow" if self.mode == "full-auto" else "ask"

    def refusal(self, action: str, tool: str | None = None) -> str:
        if action == "call" and _name_matches(tool or "", self.deny_tools):
            return (
                f"A deny_tools rule in the approval policy refuses {tool}. Do not call it again; reach the goal "
                "another way."
            )
        if self.mode == "plan":
            return (
                f"Refused: this session is in plan mode, where {PLANNED_ACTIONS.get(action, action + 's')} are "
                "not allowed until the user approves a plan; nothing was changed. Read and search as you need, "
                "then reply with your plan (the steps, the files and the changes) as your final answer, without "
                "a tool call."
            )
        if action == "call":
            return (
                "This session is read-only: tools from MCP servers are not allowed unless an allow_tools rule "
                "names them. Answer without this tool, or ask the user to allow it."
            )
        if self.mode == "read-only":
            return (
                f"This session is read-only: {action}s are not allowed. Describe the change in your "
                "answer instead, or ask the user to switch the approval mode."
            )
        return f"A rule in the approval policy denies this {action}. Do not retry it; try another approach."


def _matches(line: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(line, p) or fnmatch.fnmatchcase(line.split(" ")[0], p) for p in patterns)


def _name_matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


class NobodyAnswers:
    """Subscribes to a session that runs where nobody can answer (a task attempt): each
    ApprovalRequested is declined at once, with the reason the terminal's prompt gives at the end of
    its input, instead of the turn waiting for an answer that never comes."""

    def __init__(self, session) -> None:
        self.session = session
        self._tasks: set[asyncio.Task] = set()
        session.subscribe(self)

    def __call__(self, event: Event) -> None:
        if isinstance(event, ApprovalRequested):
            decision = ApprovalDecision(request_id=event.request_id, approved=False, comment=UNANSWERED)
            task = asyncio.get_running_loop().create_task(self.session.submit(decision))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
