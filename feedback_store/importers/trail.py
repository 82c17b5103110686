"""An imported session as teachback events (feedback_store.importers.imports): the Trail each
importer (feedback_store.importers.claude, feedback_store.importers.codex) fills from one
log file, line by line, and the outcome of a call as the foreign log says it."""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from agent.protocol import (
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    Event,
    ModelUsage,
    SessionStarted,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)
from agent.protocol.roles import NO_ROLES, Roles
from feedback_store.importers.log_lines import BadLine

log = logging.getLogger(__name__)

Identify = Callable[[Path], str | None]  # a folder -> its repository's identity (agent.runtime)
NO_RESULT = "[no result was recorded: the session stopped before this call finished]"


@dataclass(frozen=True)
class Outcome:
    """What a tool call came to, as the foreign log says."""

    ok: bool
    text: str
    error_kind: str | None = None
    exit_code: int | None = None
    refused: bool = False  # a person said no to the call
    comment: str | None = None  # what they said with it, when the log has it with the result


@cache
def known_tools(agent: str) -> dict[str, dict[str, Any]]:
    text = resources.files("feedback_store.importers").joinpath("agent_tools.json").read_text(encoding="utf-8")
    return {t["function"]["name"]: t for t in json.loads(text).get(agent, [])}


@cache
def known_roles(agent: str) -> dict[str, dict[str, Any]]:
    """What the agent's own tools' arguments mean (agent.protocol.roles), by tool name: the monitor
    checks an imported call's command line and the paths it reads by them."""
    text = resources.files("feedback_store.importers").joinpath("agent_tool_roles.json").read_text(encoding="utf-8")
    return {name: Roles.from_dict(roles).to_dict() for name, roles in json.loads(text).get(agent, {}).items()}


def timestamp(value: Any, default: float) -> float:
    """An ISO 8601 time (as the logs write them, Z included) as Unix time; `default` if unreadable."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value) if abs(value) < 2**53 else math.nan
        return seconds if math.isfinite(seconds) else default
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except (ValueError, OverflowError, OSError):  # not a time, or one the platform cannot place
            log.debug("unreadable time %r in a log", value[:100])
    return default


class Trail:
    """One foreign session as teachback events, in order. `tag`s name each item's place in the log
    (its line), so the same log always gives the same event ids."""

    def __init__(self, agent: str, key: str, *, command_tools: Iterable[str], edit_tools: Iterable[str]) -> None:
        self.agent, self.session_id = agent, f"{agent}-{key}"
        self.command_tools, self.edit_tools = frozenset(command_tools), frozenset(edit_tools)
        self.version: str | None = None
        self.cwd: str | None = None
        self.model: str | None = None
        self.repository: str | None = None
        self.commit: str | None = None
        self.context: list[str] = []  # what the agent was told before the first instruction
        self.started: float | None = None
        self.lines = 0
        self.conversation = False  # whether any line was part of the conversation
        self.skipped: Counter[str] = Counter()
        self.bad_lines: list[BadLine] = []
        self.body: list[Event] = []
        self.turn = 0
        self.step = 0
        self.in_turn = False
        self.calls: dict[str, tuple[str, str | None, float]] = {}  # open call id -> name, target, start time
        self.arguments: dict[str, set[str]] = {}  # tool name -> argument names seen, in order of first use
        self.refusals: list[tuple[str, str, Outcome, float]] = []  # waiting for the user's next words
        self.last_reply: str | None = None  # the latest assistant message's event id
        self.interrupted: str | None = None  # the reply an interrupt stopped, until the user says why
        self.interruptions: list[tuple[str, str, str, float]] = []  # (marker id, reply id, words, ts)
        self.task: dict[str, Any] | None = None  # a graded task attempt's task and reward (config `task`)

    def _id(self, tag: str) -> str:
        return f"{self.session_id}-{tag}"

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1

    def bad(self, line: BadLine) -> None:
        """A line that could not be read: counted, and kept to be named with its number."""
        self.skip(line.reason)
        self.bad_lines.append(line)

    def seen(self, ts: float) -> float:
        if self.started is None or ts < self.started:
            self.started = ts
        return ts

    # -- what the log says ---------------------------------------------------------------

    def user(self, tag: str, text: str, ts: float) -> None:
        self.seen(ts)
        self._close_calls(tag, ts)
        self._flush_refusals(text, ts)
        if self.interrupted is not None:
            self.interruptions.append((self._id(f"{tag}-interrupt"), self.interrupted, text, ts))
            self.interrupted = None
        self._end_turn(tag, ts, "answered")
        self.turn += 1
        self.step, self.in_turn = 0, True
        message = {"role": "user", "content": text}
        self.body.append(
            TurnStarted(session_id=self.session_id, id=self._id(tag), ts=ts, turn=self.turn, text=text, message=message)
        )

    def interrupt(self, ts: float) -> None:
        """The user stopped the agent: their next words, if any, are feedback on the reply they stopped
        (a refused call already waits for them as its comment)."""
        self.seen(ts)
        if not self.refusals and self.last_reply is not None:
            self.interrupted = self.last_reply

    def reply(
        self,
        tag: str,
        text: str,
        calls: list[tuple[str, str, Any]],
        ts: float,
        model: str | None = None,
        usage: tuple[int, int] | None = None,
    ) -> None:
        """An assistant message: its text and its calls (call id, tool name, arguments)."""
        self.seen(ts)
        self._close_calls(tag, ts)
        self._flush_refusals(None, ts)
        self.interrupted = None
        self.model = self.model or model
        self.step += 1
        tool_calls = []
        for call_id, name, arguments in calls:
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
            tool_calls.append({"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}})
            if isinstance(arguments, dict):
                self.arguments.setdefault(name, set()).update(arguments)
            else:
                self.arguments.setdefault(name, set())
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if tool_calls:
            message["tool_calls"] = tool_calls
        event_id = self._id(tag)
        self.body.append(
            AssistantMessage(session_id=self.session_id, id=event_id, ts=ts, step=self.step, message=message)
        )
        self.last_reply = event_id
        if usage is not None:
            self.body.append(
                ModelUsage(
                    session_id=self.session_id,
                    id=self._id(f"{tag}-usage"),
                    ts=ts,
                    cause_id=event_id,  # the reply it made, as a live session's usage names it
                    model=model or self.model or "unknown",
                    step=self.step,
                    prompt_tokens=usage[0],
                    completion_tokens=usage[1],
                    cost_usd=0.0,  # the logs keep no prices
                    latency_ms=0.0,
                )
            )
        for (call_id, name, arguments), call in zip(calls, tool_calls, strict=True):
            target = self.target_of(name, arguments)
            self.calls[call_id] = (name, target, ts)
            self.body.append(
                ToolCallStarted(
                    session_id=self.session_id,
                    id=self._id(f"{tag}-{call_id}"),
                    ts=ts,
                    call_id=call_id,
                    name=name,
                    arguments=call["function"]["arguments"],
                    step=self.step,
                    target=target,
                    roles=self.roles_of(name),
                )
            )

    def result(self, tag: str, call_id: str, outcome: Outcome, ts: float) -> None:
        self.seen(ts)
        if call_id not in self.calls:
            self.skip("results of calls not in the log")
            return
        if outcome.refused:
            self.refusals.append((tag, call_id, outcome, ts))
            return
        self._finish(tag, call_id, outcome, ts)

    def unparsed(self, tag: str, feedback: str, ts: float) -> None:
        """The agent could not read the last reply as a call (a text-mode agent's parse error): a
        schema failure of that reply, recorded as a live session records one (agent.call_runner)."""
        self.seen(ts)
        call_id = f"unparsed_{self.step}"
        message = {"role": "user", "content": feedback}
        common = dict(session_id=self.session_id, call_id=call_id, name="", step=self.step)
        self.body.append(ToolCallStarted(**common, id=self._id(f"{tag}-unparsed"), ts=ts, arguments=""))
        self.body.append(
            ToolCallFinished(
                **common,
                id=self._id(f"{tag}-unparsed-done"),
                ts=ts,
                ok=False,
                result=feedback,
                error_kind="malformed_call",
                message=message,
            )
        )

    def target_of(self, name: str, arguments: Any) -> str | None:
        """The path, command or pattern a call names (each importer knows its agent's arguments)."""
        return None

    def roles_of(self, name: str) -> dict[str, Any]:
        """What the arguments of the agent's tool `name` mean (agent.protocol.roles), as a dict."""
        return known_roles(self.agent).get(name, NO_ROLES.to_dict())

    def stop(self, tag: str, ts: float) -> None:
        """The agent said its turn is over (a hook's Stop): calls it never answered get a result that
        says so, refusals still waiting for the user's words are resolved without them, and the
        turn ends."""
        self.seen(ts)
        self._close_calls(tag, ts)
        self._flush_refusals(None, ts)
        self._end_turn(tag, ts, "answered")

    # -- building ------------------------------------------------------------------------

    def _finish(self, tag: str, call_id: str, outcome: Outcome, ts: float) -> None:
        name, target, started = self.calls.pop(call_id)
        message = {"role": "tool", "tool_call_id": call_id, "content": outcome.text}
        self.body.append(
            ToolCallFinished(
                session_id=self.session_id,
                id=self._id(f"{tag}-{call_id}-done"),
                ts=max(ts, started),
                call_id=call_id,
                name=name,
                ok=outcome.ok,
                result=outcome.text,
                step=self.step,
                error_kind=None if outcome.ok else outcome.error_kind or "failed",
                target=target,
                exit_code=outcome.exit_code,
                duration_ms=max(0.0, (ts - started) * 1000),
                message=message,
            )
        )

    def _flush_refusals(self, words: str | None, ts: float) -> None:
        for tag, call_id, outcome, at in self.refusals:
            request = self._id(f"{tag}-{call_id}-approval")
            name, target, _ = self.calls[call_id]
            kind = "command" if name in self.command_tools else "edit" if name in self.edit_tools else "call"
            common = dict(session_id=self.session_id, request_id=request, call_id=call_id)
            self.body.append(
                ApprovalRequested(
                    **common, id=f"{request}-asked", ts=at, action=kind, summary=name, detail=target or ""
                )
            )
            said = outcome.comment or words
            self.body.append(ApprovalResolved(**common, id=f"{request}-answered", ts=at, approved=False, comment=said))
            self._finish(tag, call_id, outcome, at)
        self.refusals = []

    def _close_calls(self, tag: str, ts: float) -> None:
        """Calls the log never answered get a result that says so: every call in a conversation
        has one."""
        for call_id in [c for c in self.calls if c not in {r[1] for r in self.refusals}]:
            self._finish(f"{tag}-open", call_id, Outcome(False, NO_RESULT, "interrupted"), ts)

    def _end_turn(self, tag: str, ts: float, reason: str) -> None:
        if self.in_turn:
            self.body.append(
                TurnFinished(
                    session_id=self.session_id,
                    id=self._id(f"{tag}-end"),
                    ts=ts,
                    turn=self.turn,
                    reason=reason,
                    steps=self.step,
                )  # type: ignore[arg-type]
            )
            self.in_turn = False

    def tools(self) -> list[dict[str, Any]]:
        known = known_tools(self.agent)
        return [
            known.get(name)
            or {
                "type": "function",
                "function": {
                    "name": name,
                    "description": "",
                    "parameters": {"type": "object", "properties": {k: {} for k in sorted(keys)}},
                },
            }
            for name, keys in self.arguments.items()
        ]

    def events(self, *, finished: bool = True) -> list[Event]:
        """The session's events. `finished=False` (a session still running, recorded as it goes)
        leaves open calls, waiting refusals and the current turn open for what comes next."""
        end = self.body[-1].ts if self.body else (self.started or 0.0)
        if finished:
            self._close_calls("end", end)
            self._flush_refusals(None, end)
            self._end_turn("end", end, "interrupted" if self.interrupted else "answered")
        config: dict[str, Any] = {"agent": self.agent, "agent_version": self.version, "imported": True}
        if self.task is not None:
            config["task"] = self.task
        start = SessionStarted(
            session_id=self.session_id,
            id=self._id("start"),
            ts=self.started or end,
            workspace=self.cwd or "",
            model=self.model or "unknown",
            frontend=self.agent,
            system_prompt="\n\n".join(self.context),
            tools=self.tools(),
            git_head=self.commit,
            repository=self.repository,
            config=config,
        )
        return [start, *self.body]
