"""Payloads from other agents' hooks (feedback_store.capture.inbox) as teachback sessions.

A session is rebuilt from all of its inbox rows each time new ones arrive, through the importers'
Trail (feedback_store.importers.trail), so the ids are the same every time and only what is new is
recorded; the pairs follow the import rules (the recorder's, then feedback_store.importers.log_pairs).
Hooks show tool calls, not the replies around them: consecutive PreToolUse calls are one assistant
reply. A call the host asked permission for that never ran by the user's next prompt (or the end of
the turn) was refused, and that prompt is what the user said about it. A call teachback's guard
denied is a denied call with the lesson as its result.

At Stop the transcript the payload names is read with the agent's importer, and what live capture
missed is added as rows of its own (source `transcript`): the assistant's words, the model, prompts
and calls no hook reported. Only what is newer than the rows already recorded is taken, so a turn
once recorded keeps its shape. A missing or unreadable transcript changes nothing.
"""

from __future__ import annotations

import json
import logging
import os
import stat as stat_module
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from agent.protocol import ApprovalResolved, AssistantMessage, ToolCallFinished, TurnStarted
from feedback_store.capture import inbox
from feedback_store.errors import StoreError
from feedback_store.importers import claude, codex
from feedback_store.importers.imports import ImportReport, record_trail, remember_import
from feedback_store.importers.log_lines import NotALogFile
from feedback_store.importers.trail import Identify, Outcome, Trail
from feedback_store.store import Store

log = logging.getLogger(__name__)

AGENTS: dict[str, ModuleType] = {"claude-code": claude, "codex": codex}
TRAILS: dict[str, Callable[..., Trail]] = {"claude-code": claude.ClaudeTrail, "codex": codex.CodexTrail}
# Codex's hooks name its shell tool `Bash`, whatever its log calls it.
COMMAND_TOOLS = {"claude-code": claude.COMMAND_TOOLS, "codex": (*codex.COMMAND_TOOLS, "Bash")}
REFUSED = {"claude-code": claude.REFUSED, "codex": codex.REFUSALS[0]}
RESPONSE_CHARS = 100_000  # of a tool's response kept as its result
ENDS = ("Stop", "SessionEnd")


@dataclass
class CaptureReport:
    sessions: int = 0
    events: int = 0
    pairs: int = 0
    transcripts: int = 0  # transcripts that added something
    problems: list[str] = field(default_factory=list)


def process(store: Store, identify: Identify) -> CaptureReport:
    """Record every session that has rows not yet recorded (one that fails is named in the report and
    tried again next time: its rows stay unrecorded)."""
    report = CaptureReport()
    for row in store.query("SELECT DISTINCT agent, session FROM hook_inbox WHERE processed = 0 ORDER BY agent"):
        if row["agent"] not in AGENTS:
            continue
        counts = ImportReport()
        try:
            process_session(store, row["agent"], row["session"], identify, counts, report)
        except StoreError as exc:  # one session that cannot be recorded leaves the others to record
            report.problems.append(f"{row['agent']} session {row['session']}: {exc}")
            continue
        report.sessions += 1
        report.events += counts.events
        report.pairs += counts.pairs
    return report


def process_session(
    store: Store, agent: str, session: str, identify: Identify, counts: ImportReport, report: CaptureReport
) -> None:
    rows = _rows(store, agent, session)
    if _add_transcript(store, agent, session, rows, identify):
        report.transcripts += 1
        rows = _rows(store, agent, session)
    trail = build(agent, session, rows, identify)
    record_trail(store, trail, counts, finished=False)
    with store.write() as conn:
        conn.execute(
            "UPDATE hook_inbox SET processed = 1 WHERE agent = ? AND session = ? AND id <= ?",
            (agent, session, max(r["id"] for r in rows)),
        )


def _rows(store: Store, agent: str, session: str) -> list[dict[str, Any]]:
    rows = store.query(
        "SELECT id, source, ts, payload, processed FROM hook_inbox WHERE agent = ? AND session = ? ORDER BY ts, id",
        (agent, session),
    )
    for row in rows:
        try:
            value = json.loads(row["payload"])
        except (ValueError, RecursionError):  # the hook stores only what parsed; anything else is skipped
            value = None
        row["payload"] = value if isinstance(value, dict) else {}
    return rows


# -- building the session ------------------------------------------------------------------------


class _Builder:
    """Feeds rows to a Trail in order, keeping what hooks tell apart across rows."""

    def __init__(self, agent: str, session: str, identify: Identify) -> None:
        self.agent = agent
        self.identify = identify
        self.trail = TRAILS[agent](
            agent, session, command_tools=COMMAND_TOOLS[agent], edit_tools=AGENTS[agent].EDIT_TOOLS
        )
        self.group: dict[str, Any] | None = None  # calls sent together, not yet a reply
        self.calls: dict[str, tuple[str, str]] = {}  # call id -> (tool, arguments as JSON): every call seen
        self.finished: set[str] = set()
        self.asked: set[str] = set()  # calls the host asked the user about
        self.asking: list[tuple[str, str]] = []  # permission asked before its PreToolUse came
        self.said = False  # the turn has the assistant's own words

    def row(self, tag: str, source: str, ts: float, payload: dict[str, Any]) -> None:
        if not self.trail.conversation:
            self._meta(payload)
        if source == "guard":
            self._result(tag, payload.get("call_id"), Outcome(False, str(payload.get("reason", "")), "denied"), ts)
            return
        kind = payload.get("hook_event_name") if source == "hook" else payload.get("kind")
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(tag, ts, payload)

    def _meta(self, payload: dict[str, Any]) -> None:
        trail = self.trail
        trail.conversation = True
        cwd = payload.get("cwd")
        if isinstance(cwd, str) and cwd:
            trail.cwd = cwd
            trail.repository = self.identify(Path(cwd)) if os.path.isdir(cwd) else None
        if isinstance(payload.get("model"), str):
            trail.model = payload["model"]

    # hook events, by name
    def _on_UserPromptSubmit(self, tag: str, ts: float, payload: dict[str, Any]) -> None:  # noqa: N802
        prompt = payload.get("prompt")
        if isinstance(prompt, str) and prompt.strip():
            self._flush()
            self._settle_asked(tag, ts)
            self.trail.user(tag, prompt, ts)
            self.said = False

    def _on_PreToolUse(self, tag: str, ts: float, payload: dict[str, Any]) -> None:  # noqa: N802
        call_id, name = _call_id(payload, tag), payload.get("tool_name")
        if not isinstance(name, str) or call_id in self.calls:
            return
        arguments = payload.get("tool_input") if isinstance(payload.get("tool_input"), dict) else {}
        self.calls[call_id] = (name, _canonical(arguments))
        if (name, _canonical(arguments)) in self.asking:
            self.asking.remove((name, _canonical(arguments)))
            self.asked.add(call_id)
        self.group = self.group or {"tag": tag, "ts": ts, "text": "", "calls": []}
        self.group["calls"].append((call_id, name, arguments))

    def _on_PermissionRequest(self, tag: str, ts: float, payload: dict[str, Any]) -> None:  # noqa: N802
        name, arguments = payload.get("tool_name"), payload.get("tool_input")
        key = (name, _canonical(arguments if isinstance(arguments, dict) else {}))
        known = payload.get("tool_use_id")
        waiting = [c for c, call in self.calls.items() if c not in self.finished and (c == known or call == key)]
        if waiting:
            self.asked.add(waiting[-1])
        else:
            self.asking.append(key)  # the host asks before its PreToolUse hook runs

    def _on_PostToolUse(self, tag: str, ts: float, payload: dict[str, Any]) -> None:  # noqa: N802
        name = str(payload.get("tool_name", ""))
        response = payload.get("tool_response")
        if self.agent == "codex":
            outcome = codex.outcome(name, response if response is not None else "")
        else:
            outcome = Outcome(True, _text(response))
        self._result(tag, _call_id(payload, tag), outcome, ts)

    def _on_PostToolUseFailure(self, tag: str, ts: float, payload: dict[str, Any]) -> None:  # noqa: N802
        error = _text(payload.get("error"))
        if payload.get("is_interrupt") is True:
            outcome = Outcome(False, error, "interrupted")
        else:
            outcome = claude.outcome(str(payload.get("tool_name", "")), error, True)
        self._result(tag, _call_id(payload, tag), outcome, ts)

    def _on_PermissionDenied(self, tag: str, ts: float, payload: dict[str, Any]) -> None:  # noqa: N802
        reason = _text(payload.get("reason")) or "The permission rules denied this call."
        self._result(tag, _call_id(payload, tag), Outcome(False, reason, "denied"), ts)

    def _on_Stop(self, tag: str, ts: float, payload: dict[str, Any]) -> None:  # noqa: N802
        self._flush()
        self._settle_asked(tag, ts)
        said = payload.get("last_assistant_message")
        if isinstance(said, str) and said.strip() and not self.said:
            self.trail.reply(f"{tag}-said", said, [], ts)
        self.trail.stop(tag, ts)

    _on_SessionEnd = _on_Stop  # noqa: N815

    # rows read from the transcript (source "transcript")
    def _on_prompt(self, tag: str, ts: float, payload: dict[str, Any]) -> None:
        self._on_UserPromptSubmit(tag, ts, payload)

    def _on_text(self, tag: str, ts: float, payload: dict[str, Any]) -> None:
        self._flush()
        self.group = {"tag": tag, "ts": ts, "text": str(payload.get("text", "")), "calls": []}
        self.said = True

    def _on_model(self, tag: str, ts: float, payload: dict[str, Any]) -> None:
        self.trail.model = self.trail.model or payload.get("model")

    def _on_call(self, tag: str, ts: float, payload: dict[str, Any]) -> None:
        self._on_PreToolUse(tag, ts, {**payload, "tool_use_id": payload.get("call_id")})

    def _on_result(self, tag: str, ts: float, payload: dict[str, Any]) -> None:
        outcome = Outcome(
            bool(payload.get("ok")),
            str(payload.get("text", "")),
            payload.get("error_kind"),
            payload.get("exit_code"),
            refused=bool(payload.get("refused")),
            comment=payload.get("comment"),
        )
        self._result(tag, payload.get("call_id"), outcome, ts)

    # building
    def _result(self, tag: str, call_id: Any, outcome: Outcome, ts: float) -> None:
        if not isinstance(call_id, str) or call_id not in self.calls or call_id in self.finished:
            return
        self._flush()
        self.finished.add(call_id)
        self.trail.result(tag, call_id, outcome, ts)

    def _flush(self) -> None:
        group, self.group = self.group, None
        if group is not None:
            self.trail.reply(group["tag"], group["text"], group["calls"], group["ts"])

    def _settle_asked(self, tag: str, ts: float) -> None:
        """Calls the user was asked about that never ran were refused."""
        for call_id in sorted(self.asked - self.finished):
            refusal = Outcome(False, REFUSED[self.agent], "denied", refused=True)
            self._result(f"{tag}-refused", call_id, refusal, ts)


def build(agent: str, session: str, rows: list[dict[str, Any]], identify: Identify) -> Trail:
    builder = _Builder(agent, session, identify)
    for row in rows:
        builder.row(f"R{row['id']}", row["source"], row["ts"], row["payload"])
    builder._flush()
    return builder.trail


def _call_id(payload: dict[str, Any], tag: str) -> str:
    value = payload.get("tool_use_id")
    return value if isinstance(value, str) and value else f"call-{tag}"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _text(value: Any) -> str:
    """A tool's response as the text of its result: a command's output, a file read, else the JSON it
    sent."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, dict) and ("stdout" in value or "stderr" in value):
        text = "\n".join(str(value.get(k) or "") for k in ("stdout", "stderr") if value.get(k))
    elif (
        isinstance(value, dict)
        and isinstance(value.get("file"), dict)
        and isinstance(value["file"].get("content"), str)
    ):
        text = value["file"]["content"]  # Claude Code's Read: the file's text, as the model saw it
    elif value is None:
        text = ""
    else:
        text = json.dumps(value, ensure_ascii=False)
    return text[:RESPONSE_CHARS]


# -- what the transcript adds --------------------------------------------------------------------


def _add_transcript(store: Store, agent: str, session: str, rows: list[dict[str, Any]], identify: Identify) -> bool:
    """Rows for what the transcript named by the latest Stop holds and live capture missed."""
    named = [
        r["payload"].get("transcript_path")
        for r in rows
        if r["source"] == "hook" and r["payload"].get("hook_event_name") in ENDS and not r["processed"]
    ]
    path = Path(named[-1]) if named and isinstance(named[-1], str) and named[-1] else None
    if path is None:
        return False
    try:
        stat = path.stat()
        if not stat_module.S_ISREG(stat.st_mode):
            return False
        transcript = AGENTS[agent].read(path, identify)
    except (OSError, NotALogFile) as exc:  # missing or unreadable: live capture stands as it is
        log.info("transcript %s not read: %s", path, exc)
        return False
    seen = max((r["ts"] for r in rows if r["processed"]), default=float("-inf"))
    live = [r["payload"] for r in rows if r["source"] != "transcript"]
    calls = {p.get("tool_use_id") for p in live if p.get("hook_event_name") == "PreToolUse"}
    prompts = {p.get("prompt") for p in live if p.get("hook_event_name") == "UserPromptSubmit"}
    added = [
        inbox.Row(agent, session, "transcript", ts, json.dumps(item, ensure_ascii=False), f"t-{key}")
        for key, ts, item in _missed(transcript, calls, prompts)
        if ts > seen
    ]
    with store.write() as conn:
        inbox.insert(conn, added)
    remember_import(store, path, agent, transcript.session_id, stat, transcript.lines, sum(transcript.skipped.values()))
    return bool(added)


def _missed(transcript: Trail, calls: set[Any], prompts: set[Any]) -> Iterator[tuple[str, float, dict[str, Any]]]:
    """(key, time, row) for each thing in the transcript that no hook reported."""
    if transcript.model:
        yield f"{transcript.session_id}-model", transcript.started or 0.0, {"kind": "model", "model": transcript.model}
    comments: dict[str, str | None] = {}
    for event in transcript.events():
        if isinstance(event, TurnStarted) and event.text not in prompts:
            yield event.id, event.ts, {"kind": "prompt", "prompt": event.text}
        elif isinstance(event, AssistantMessage):
            text = event.message.get("content")
            if isinstance(text, str) and text.strip():
                yield event.id, event.ts, {"kind": "text", "text": text}
            for call in event.message.get("tool_calls") or []:
                if call["id"] not in calls:
                    function = call["function"]
                    arguments = _arguments(function["arguments"])
                    row = {
                        "kind": "call",
                        "call_id": call["id"],
                        "tool_name": function["name"],
                        "tool_input": arguments,
                    }
                    yield f"{event.id}-{call['id']}", event.ts, row
        elif isinstance(event, ApprovalResolved) and not event.approved:
            comments[event.call_id] = event.comment
        elif isinstance(event, ToolCallFinished) and event.call_id not in calls:
            row = {
                "kind": "result",
                "call_id": event.call_id,
                "ok": event.ok,
                "text": event.result,
                "error_kind": event.error_kind,
                "exit_code": event.exit_code,
                "refused": event.call_id in comments,
                "comment": comments.get(event.call_id),
            }
            yield event.id, event.ts, row


def _arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}
