"""The event handlers: each writes an event's table rows (sessions, messages, tool calls, edits,
approvals, turns) and runs the steps derived from it (the reward-hacking checks, feedback pairs,
plans), each step in its own savepoint (feedback_store.recording.writes)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from agent.protocol import (
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    EditApplied,
    EditReviewed,
    Event,
    HookRan,
    ModelUsage,
    PlanProposed,
    PlanReviewed,
    SessionStarted,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)
from feedback_store.content import renders
from feedback_store.content.event_blobs import JSON, TEXT
from feedback_store.content.hashing import canonical_json, message_json, ordered_json
from feedback_store.recording import monitor, pairs, plans
from feedback_store.recording.writes import insert_blob, insert_event, named_blob, put_blob, run_step
from feedback_store.team import provenance

TITLE_LENGTH = 80


def record_usage(conn: sqlite3.Connection, event: ModelUsage) -> bool:
    """A model call: its rendered prompt is stored in chunks shared between calls, and its events row
    names them. The rows are made first and written once; should they fail to be made or written,
    the events row keeps the event whole and the failure is noted, as for any handler."""
    rows = renders.UsageRows(conn, event)
    if not insert_event(conn, event, rows.json):
        return False
    run_step(
        conn,
        event,
        event.type,
        lambda: _model_usage(conn, event, rows),
        undone=lambda: conn.execute("UPDATE events SET json = ? WHERE id = ?", (event.to_json(), event.id)),
    )
    return True


def _add_message(conn: sqlite3.Connection, session_id: str, event_id: str, message: dict) -> int:
    return conn.execute(
        """
        INSERT INTO messages (session_id, seq, event_id, role, message)
        SELECT ?, coalesce(max(seq), -1) + 1, ?, ?, ? FROM messages WHERE session_id = ? RETURNING seq
        """,
        (session_id, event_id, message.get("role"), message_json(message), session_id),
    ).fetchone()[0]


LAST_ASSISTANT_SEQ = "(SELECT max(seq) FROM messages WHERE session_id = ? AND role = 'assistant')"


def _last_assistant_seq(conn: sqlite3.Connection, session_id: str) -> int | None:
    return conn.execute(f"SELECT {LAST_ASSISTANT_SEQ}", (session_id,)).fetchone()[0]


def _session_started(conn: sqlite3.Connection, event: SessionStarted, row: dict[str, Any]) -> None:
    prompt_hash = named_blob(row, "system_prompt", TEXT) or put_blob(conn, "system_prompt", event.system_prompt)
    tools_hash = named_blob(row, "tools", JSON) or put_blob(conn, "tools", ordered_json(event.tools))
    conn.execute(
        """
        INSERT INTO sessions (id, workspace, model, frontend, git_head, config, system_prompt_hash,
            tools_hash, protocol_version, started_at, repository)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (id) DO UPDATE SET workspace = excluded.workspace, model = excluded.model,
            frontend = excluded.frontend, git_head = excluded.git_head, config = excluded.config,
            repository = excluded.repository,
            system_prompt_hash = excluded.system_prompt_hash, tools_hash = excluded.tools_hash,
            protocol_version = excluded.protocol_version,
            started_at = min(coalesce(sessions.started_at, excluded.started_at), excluded.started_at)
        """,
        (
            event.session_id,
            event.workspace,
            event.model,
            event.frontend,
            event.git_head,
            canonical_json(event.config),
            prompt_hash,
            tools_hash,
            event.protocol_version,
            event.ts,
            event.repository,
        ),
    )
    # An imported session names its agent in its config (feedback_store.importers.imports); ours is teachback.
    agent = event.config.get("agent") or provenance.TEACHBACK_AGENT
    version = event.config.get("agent_version") if "agent" in event.config else provenance.teachback_version()
    provenance.stamp(conn, event.session_id, agent, version)
    has_messages = conn.execute("SELECT 1 FROM messages WHERE session_id = ? LIMIT 1", (event.session_id,)).fetchone()
    if not has_messages:  # a resumed session keeps its recorded conversation
        _add_message(conn, event.session_id, event.id, {"role": "system", "content": event.system_prompt})


def _turn_started(conn: sqlite3.Connection, event: TurnStarted, row: dict[str, Any]) -> None:
    title = event.text.strip().splitlines()[0][:TITLE_LENGTH] if event.text.strip() else None
    conn.execute("INSERT OR IGNORE INTO sessions (id, started_at) VALUES (?, ?)", (event.session_id, event.ts))
    conn.execute("UPDATE sessions SET title = ? WHERE id = ? AND title IS NULL", (title, event.session_id))
    conn.execute(
        "INSERT INTO turns (id, session_id, turn, text, started_at) VALUES (?, ?, ?, ?, ?)",
        (event.id, event.session_id, event.turn, event.text, event.ts),
    )
    _add_message(conn, event.session_id, event.id, event.message)


def _assistant_message(conn: sqlite3.Connection, event: AssistantMessage, row: dict[str, Any]) -> None:
    _add_message(conn, event.session_id, event.id, event.message)


def _model_usage(conn: sqlite3.Connection, event: ModelUsage, rows: renders.UsageRows) -> None:
    if rows.problem is not None:
        raise rows.problem
    for key, kind, text in rows.blobs:  # hashed when the rows were made
        insert_blob(conn, key, kind, text)
    render = rows.render
    conn.execute(
        """
        INSERT INTO model_calls (id, session_id, step, model, prompt_tokens, completion_tokens,
            cost_usd, latency_ms, attempts, logprobs, ts, tool_mode, rendered, prompt_token_ids,
            completion_token_ids) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """,
        (
            event.id,
            event.session_id,
            event.step,
            event.model,
            event.prompt_tokens,
            event.completion_tokens,
            event.cost_usd,
            event.latency_ms,
            event.attempts,
            None if event.logprobs is None else json.dumps(event.logprobs),
            event.ts,
            render["tool_mode"],
            render["rendered"],
            render["prompt_token_ids"],
            render["completion_token_ids"],
        ),
    )


# The position of the reply that made a call: the assistant message the call names as its cause; for
# a log without causes (imports), the latest assistant message. Parameters: cause id, session id twice.
REPLY_SEQ = (
    "coalesce((SELECT seq FROM messages WHERE event_id = ? AND session_id = ? AND role = 'assistant'), "
    f"{LAST_ASSISTANT_SEQ})"
)


def call_of(running: bool = True) -> str:
    """SQL for the tool_calls row an event of a call belongs to: the started call the event names as
    its cause; for a log without causes (imports), the latest call with its call id (still running,
    when `running`). The one place rows are linked by guessing. Parameters: cause id, session id,
    call id. One statement with the write it serves: the recorder's speed is per statement."""
    status = " AND status = 'running'" if running else ""
    return (
        f"coalesce((SELECT id FROM tool_calls WHERE id = ?{status}), (SELECT id FROM tool_calls "
        f"WHERE session_id = ? AND call_id = ?{status} ORDER BY started_at DESC LIMIT 1))"
    )


RUNNING_CALL, ANY_CALL = call_of(running=True), call_of(running=False)


def _tool_call_started(conn: sqlite3.Connection, event: ToolCallStarted, row: dict[str, Any]) -> None:
    seq = conn.execute(
        f"""
        INSERT INTO tool_calls (id, session_id, call_id, name, arguments, step, message_seq, status, started_at,
            roles, blocked_by_hook)
        VALUES (?, ?, ?, ?, ?, ?, {REPLY_SEQ}, 'running', ?, ?, 0) RETURNING message_seq
        """,
        (
            event.id,
            event.session_id,
            event.call_id,
            event.name,
            event.arguments,
            event.step,
            event.cause_id,
            event.session_id,
            event.session_id,
            event.ts,
            None if event.roles is None else canonical_json(event.roles),
        ),
    ).fetchone()[0]
    if seq is not None:  # every tool's arguments: command lines, and the paths read, listed or searched
        run_step(
            conn,
            event,
            "monitor",
            lambda: _flag(conn, event, seq, monitor.check_call(event.name, event.args, event.roles)),
        )


def _tool_call_finished(conn: sqlite3.Connection, event: ToolCallFinished, row: dict[str, Any]) -> None:
    if event.message is not None:
        _add_message(conn, event.session_id, event.id, event.message)
    status = "ok" if event.ok else "error"
    values = (status, event.error_kind, event.target, event.result, event.duration_ms, event.ts, event.exit_code)
    started = conn.execute(
        f"""
        UPDATE tool_calls SET status = ?, error_kind = ?, target = ?, result = ?, duration_ms = ?, finished_at = ?,
            exit_code = ?, finished_id = ?
        WHERE id = {RUNNING_CALL} RETURNING message_seq, roles, blocked_by_hook
        """,
        (*values, event.id, event.cause_id, event.session_id, event.call_id),
    ).fetchone()
    if started is not None:
        seq, roles, blocked = started[0], started[1], bool(started[2])
    else:  # finished without starting: a call skipped by an interrupt
        seq, roles, blocked = _last_assistant_seq(conn, event.session_id), None, False
        conn.execute(
            """
            INSERT INTO tool_calls (id, session_id, call_id, name, step, message_seq, status, error_kind,
                target, result, duration_ms, finished_at, exit_code, finished_id, blocked_by_hook)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)
            """,
            (event.id, event.session_id, event.call_id, event.name, event.step, seq, *values, event.id),
        )
        if event.error_kind in ("denied", "interrupted"):
            return  # the user stopped the turn; the model did nothing wrong
    call = pairs.Call(roles=None if roles is None else json.loads(roles), blocked_by_hook=blocked)
    run_step(conn, event, "pairs", lambda: pairs.on_tool_finished(conn, event, seq, call))


def _edit_applied(conn: sqlite3.Connection, event: EditApplied, row: dict[str, Any]) -> None:
    call = conn.execute(
        f"SELECT message_seq FROM tool_calls WHERE id = {ANY_CALL}", (event.cause_id, event.session_id, event.call_id)
    ).fetchone()
    seq = call[0] if call else _last_assistant_seq(conn, event.session_id)
    conn.execute(
        """
        INSERT INTO edits (id, session_id, call_id, event_id, message_seq, path, new_path, kind,
            before_hash, after_hash, diff, syntax_error, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """,
        (
            event.edit_id,
            event.session_id,
            event.call_id,
            event.id,
            seq,
            event.path,
            event.new_path,
            event.kind,
            named_blob(row, "before", TEXT) or put_blob(conn, "file", event.before),
            named_blob(row, "after", TEXT) or put_blob(conn, "file", event.after),
            event.diff,
            event.syntax_error,
            event.ts,
        ),
    )
    run_step(conn, event, "pairs", lambda: pairs.on_edit(conn, event, seq))
    run_step(conn, event, "plans", lambda: plans.on_edit(conn, event, seq))
    if seq is not None:
        run_step(conn, event, "monitor", lambda: _check_edit(conn, event, seq))


def _check_edit(conn: sqlite3.Connection, event: EditApplied, seq: int) -> None:
    findings = monitor.check_edit(
        event.path,
        event.kind,
        event.before,
        event.after,
        event.diff,
        event.new_path,
        test_text=_test_text(conn, event.session_id) if monitor.LITERAL_BRANCH.search(event.diff) else "",
    )
    _flag(conn, event, seq, findings)


def _test_text(conn: sqlite3.Connection, session_id: str) -> str:
    """Test code the session has seen: test files it read or wrote (for the hard-coding rule)."""
    texts = []
    for target, result in conn.execute(
        "SELECT target, result FROM tool_calls WHERE session_id = ? AND status = 'ok' AND name = 'read_file'",
        (session_id,),
    ):
        if monitor.is_test_path(target):
            texts.append(result or "")
    for path, content in conn.execute(
        "SELECT e.path, b.content FROM edits e JOIN blobs b ON b.hash = e.after_hash WHERE e.session_id = ?",
        (session_id,),
    ):
        if monitor.is_test_path(path):
            texts.append(content)
    return "\n".join(texts)


def _flag(conn: sqlite3.Connection, event: Event, seq: int, findings: list[monitor.Finding]) -> None:
    for finding in findings:
        conn.execute(
            "INSERT OR IGNORE INTO flags (id, session_id, rule, detail, event_id, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (f"{event.id}-{finding.rule}", event.session_id, finding.rule, finding.detail, event.id, event.ts),
        )
        pairs.open_pair(
            conn,
            source="monitor",
            session_id=event.session_id,
            failure_event_id=f"{event.id}-{finding.rule}",
            completion_seq=seq,
            feedback=finding.feedback,
            ts=event.ts,
            tool=getattr(event, "name", None)
            or pairs.tool_of_call(conn, event.session_id, getattr(event, "call_id", None)),
            error_kind=finding.rule,
            target=getattr(event, "path", None) or finding.detail,
        )


def _approval_requested(conn: sqlite3.Connection, event: ApprovalRequested, row: dict[str, Any]) -> None:
    conn.execute(
        """
        INSERT OR IGNORE INTO approvals (id, session_id, call_id, action, summary, detail, requested_at)
        VALUES (?, ?, ?, ?, ?, ?, ?)
        """,
        (event.request_id, event.session_id, event.call_id, event.action, event.summary, event.detail, event.ts),
    )


def _approval_resolved(conn: sqlite3.Connection, event: ApprovalResolved, row: dict[str, Any]) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO approvals (id, session_id, call_id) VALUES (?, ?, ?)",
        (event.request_id, event.session_id, event.call_id),
    )
    conn.execute(
        "UPDATE approvals SET approved = ?, comment = ?, resolved_at = ? WHERE id = ?",
        (int(event.approved), event.comment, event.ts, event.request_id),
    )


def _edit_reviewed(conn: sqlite3.Connection, event: EditReviewed, row: dict[str, Any]) -> None:
    conn.execute(
        "UPDATE edits SET decision = ?, comment = ?, user_hash = ?, reviewed_at = ? WHERE id = ?",
        (
            event.decision,
            event.comment,
            named_blob(row, "user_content", TEXT) or put_blob(conn, "file", event.user_content),
            event.ts,
            event.edit_id,
        ),
    )
    run_step(conn, event, "pairs", lambda: pairs.on_review(conn, event))


def _turn_finished(conn: sqlite3.Connection, event: TurnFinished, row: dict[str, Any]) -> None:
    conn.execute(
        """
        UPDATE turns SET finished_at = ?, reason = ?, summary = ?, steps = ?, prompt_tokens = ?,
            completion_tokens = ?, cost_usd = ? WHERE session_id = ? AND turn = ? AND finished_at IS NULL
        """,
        (
            event.ts,
            event.reason,
            event.summary,
            event.steps,
            event.prompt_tokens,
            event.completion_tokens,
            event.cost_usd,
            event.session_id,
            event.turn,
        ),
    )


def _hook_ran(conn: sqlite3.Connection, event: HookRan, row: dict[str, Any]) -> None:
    if event.decision == "deny" and event.call_id is not None:  # a PreToolUse or PermissionRequest hook said no
        conn.execute(
            f"UPDATE tool_calls SET blocked_by_hook = 1 WHERE id = {RUNNING_CALL}",
            (event.cause_id, event.session_id, event.call_id),
        )
    if event.message is not None:  # a Stop hook's reason, sent to the model: part of the conversation
        _add_message(conn, event.session_id, event.id, event.message)


# Each handler writes an event's table rows, given its events row (large values as blob markers).
HANDLERS: dict[type[Event], Callable[[sqlite3.Connection, Event, dict[str, Any]], None]] = {
    SessionStarted: _session_started,  # type: ignore[dict-item]
    TurnStarted: _turn_started,  # type: ignore[dict-item]
    AssistantMessage: _assistant_message,  # type: ignore[dict-item]
    ToolCallStarted: _tool_call_started,  # type: ignore[dict-item]
    ToolCallFinished: _tool_call_finished,  # type: ignore[dict-item]
    EditApplied: _edit_applied,  # type: ignore[dict-item]
    ApprovalRequested: _approval_requested,  # type: ignore[dict-item]
    ApprovalResolved: _approval_resolved,  # type: ignore[dict-item]
    EditReviewed: _edit_reviewed,  # type: ignore[dict-item]
    TurnFinished: _turn_finished,  # type: ignore[dict-item]
    HookRan: _hook_ran,  # type: ignore[dict-item]
    PlanProposed: lambda conn, event, row: plans.on_plan_proposed(conn, event),  # type: ignore[dict-item]
    PlanReviewed: lambda conn, event, row: plans.on_plan_reviewed(conn, event),  # type: ignore[dict-item]
}
