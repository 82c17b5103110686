"""Feedback pairs, built while the session runs: each failure is stored the moment it happens and
linked to its correction when a later event fixes it.

A pair points at messages by their position (`seq`) in the recorded conversation: the failed
assistant message is `completion_seq`, the prompt is everything before it, and the correction is
the later assistant message `correction_seq`. Every function here runs inside the recorder's write
transaction, so the state lives in the database, not in memory: a recorder started after a crash
or on a resumed session carries on where the last one stopped.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from agent.protocol import (
    NOT_RUNNABLE_EXIT_CODES,
    REPEAT_ERRORS,
    SCHEMA_ERRORS,
    EditApplied,
    EditReviewed,
    ToolCallFinished,
    is_mcp_tool,
)
from agent.protocol.roles import roles_for
from common.diffs import unified_diff
from feedback_store.rows import (
    FIX_WINDOW,
    MCP_FAILURES,
    NEXT_CALL,
    SAME_CALL,
    SAME_COMMAND,
    SAME_FILE,
    SAME_TOOL,
    WINDOWED,
    WRONG_TARGET,
)


def open_pair(
    conn: sqlite3.Connection,
    *,
    source: str,
    session_id: str,
    failure_event_id: str,
    completion_seq: int,
    feedback: str,
    ts: float,
    tool: str | None = None,
    error_kind: str | None = None,
    target: str | None = None,
    anchor_seq: int | None = None,
    closes_on: str | None = None,
    correction: dict | None = None,
) -> str:
    pair_id = f"{failure_event_id}-{source}"
    conn.execute(
        """
        INSERT OR IGNORE INTO pairs (id, session_id, source, tool, error_kind, target, feedback,
            tools_hash, anchor_seq, completion_seq, correction, closes_on, failure_event_id,
            created_at, corrected_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, (SELECT tools_hash FROM sessions WHERE id = ?), ?, ?, ?, ?, ?, ?, ?)
        """,
        (
            pair_id,
            session_id,
            source,
            tool,
            error_kind,
            target,
            feedback,
            session_id,
            completion_seq if anchor_seq is None else anchor_seq,
            completion_seq,
            None if correction is None else json.dumps(correction, ensure_ascii=False),
            closes_on,
            failure_event_id,
            ts,
            ts if correction is not None else None,
        ),
    )
    return pair_id


def _close_ids(conn: sqlite3.Connection, ids: list[str], seq: int, event: ToolCallFinished) -> None:
    marks = ",".join("?" * len(ids))
    conn.execute(
        f"""
        UPDATE pairs SET correction_seq = ?, correction_event_id = ?, correction_call_id = ?, corrected_at = ?,
            closes_on = NULL
        WHERE id IN ({marks})
        """,
        (seq, event.id, event.call_id, event.ts, *ids),
    )


@dataclass(frozen=True)
class Call:
    """What the recorder's row says of the finished call: the roles its tool declared (None: recorded
    before calls carried them) and whether a hook (agent.hooks) refused it."""

    roles: dict | None
    blocked_by_hook: bool


def on_tool_finished(conn: sqlite3.Connection, event: ToolCallFinished, seq: int | None, call: Call) -> None:
    """Link earlier failures this call fixes, then record this call's own failure."""
    if seq is None or event.error_kind == "interrupted":
        return  # the user stopped the call: neither a fix nor a mistake
    sid = event.session_id
    waiting = conn.execute(
        "SELECT id, closes_on, tool, target, anchor_seq FROM pairs WHERE session_id = ? AND closes_on IS NOT NULL"
        " AND anchor_seq <= ?",
        (sid, seq),
    ).fetchall()
    if waiting:
        _link_fixes(conn, event, seq, waiting)
    if event.ok:
        return
    kind = event.error_kind or "failed"
    common = dict(
        session_id=sid,
        failure_event_id=event.id,
        completion_seq=seq,
        feedback=event.result,
        ts=event.ts,
        tool=event.name,
        error_kind=kind,
        target=event.target,
    )
    if kind in SCHEMA_ERRORS:
        open_pair(conn, source="schema", closes_on=NEXT_CALL, **common)
    elif kind in REPEAT_ERRORS:
        open_pair(conn, source="tool", closes_on=NEXT_CALL, **common)
    elif kind == "unavailable":
        return  # the MCP server could not be started: nothing the model sent was wrong
    elif (
        kind in WRONG_TARGET
        or (kind == "exit_status" and event.exit_code in NOT_RUNNABLE_EXIT_CODES)
        or (kind in MCP_FAILURES and is_mcp_tool(event.name))
    ):
        open_pair(conn, source="tool", closes_on=SAME_TOOL, **common)
    elif kind == "exit_status":
        if roles_for(event.name, call.roles).command is not None:
            _open_test_pair(conn, event, seq)
    elif kind == "denied":
        refused = conn.execute(
            "SELECT comment FROM approvals WHERE session_id = ? AND call_id = ? AND approved = 0",
            (sid, event.call_id),
        ).fetchone()
        if refused is not None:  # a person said no: that is user feedback
            if refused[0] and refused[0] not in event.result:
                common["feedback"] = f"{event.result}\n\nThe user's comment: {refused[0]}"
            open_pair(conn, source="user", closes_on=SAME_CALL, **common)
        elif call.blocked_by_hook:  # the fix is another call of the tool, one the hook lets through
            open_pair(conn, source="hook", closes_on=SAME_TOOL, **common)
        else:
            open_pair(conn, source="tool", closes_on=SAME_CALL, **common)
    else:
        open_pair(conn, source="tool", closes_on=SAME_CALL, **common)


def _link_fixes(conn: sqlite3.Connection, event: ToolCallFinished, seq: int, waiting: list[tuple]) -> None:
    """Close the open pairs (id, closes_on, tool, target, anchor_seq) that this call fixes.

    Only a call that succeeded fixes anything, and only one the model made in a later message (the
    grader's run after the session is not in the conversation, and closes only test pairs). A
    schema, repeat or wrong-target pair whose turn ended, or whose window passed, without such a
    call stays uncorrected: it is no longer waited on."""
    earlier = [row for row in waiting if row[4] < seq]  # a fix must come in a later message
    windowed = [row for row in earlier if row[1] in WINDOWED]
    expired = [row[0] for row in windowed if not _within_window(conn, event.session_id, row[4], seq)]
    if expired:
        marks = ",".join("?" * len(expired))
        conn.execute(f"UPDATE pairs SET closes_on = NULL WHERE id IN ({marks})", expired)
    if not event.ok:
        return
    fixed = []
    if event.message is not None:
        deleted = _deleted(conn, event)
        fixed = [row[0] for row in earlier if row[0] not in expired and _fixes(row, event, deleted)]
    lint_here = any(row[1] == SAME_FILE and row[4] == seq for row in waiting)
    if (fixed or lint_here) and _broke_syntax(conn, event):
        fixed = []  # an edit that left the file unparseable fixes nothing
        _explain_lint(conn, event)
    if fixed:
        _close_ids(conn, fixed, seq, event)
    if any(row[1] == SAME_COMMAND and row[2] == event.name and row[3] == event.target for row in earlier):
        _close_test_pairs(conn, event, seq)


def _fixes(row: tuple, event: ToolCallFinished, deleted: bool) -> bool:
    """Whether the successful call `event` (which `deleted` a file or not) is the correction of the
    open pair `row`."""
    closes_on, tool, target = row[1], row[2], row[3]
    if deleted and tool != event.name:
        return False
    if closes_on == NEXT_CALL:
        return True
    if closes_on == SAME_TOOL:
        return tool == event.name
    return closes_on == SAME_CALL and tool == event.name and target == event.target


def _within_window(conn: sqlite3.Connection, session_id: str, anchor: int, seq: int) -> bool:
    """Whether message `seq` is in the same turn as message `anchor`, at most FIX_WINDOW assistant
    messages after it."""
    steps, turns = conn.execute(
        """
        SELECT coalesce(sum(m.role = 'assistant'), 0), count(t.id) FROM messages m
        LEFT JOIN turns t ON t.id = m.event_id AND t.session_id = m.session_id
        WHERE m.session_id = ? AND m.seq > ? AND m.seq <= ?
        """,
        (session_id, anchor, seq),
    ).fetchone()
    return turns == 0 and steps <= FIX_WINDOW


def _deleted(conn: sqlite3.Connection, event: ToolCallFinished) -> bool:
    """Whether the call deleted a file: that corrects no failure of another tool (a failed edit or a
    repeated read is not mended by deleting the file), only one of its own."""
    return _made_an_edit(conn, event, "kind = 'delete'")


def _broke_syntax(conn: sqlite3.Connection, event: ToolCallFinished) -> bool:
    return _made_an_edit(conn, event, "syntax_error IS NOT NULL")


def _made_an_edit(conn: sqlite3.Connection, event: ToolCallFinished, where: str) -> bool:
    """Whether the call made an edit matching `where` (a fixed SQL condition on the edits table)."""
    query = f"SELECT 1 FROM edits WHERE session_id = ? AND call_id = ? AND {where}"
    return conn.execute(query, (event.session_id, event.call_id)).fetchone() is not None


def _explain_lint(conn: sqlite3.Connection, event: ToolCallFinished) -> None:
    """A lint pair's feedback is the tool result when that result told the model the syntax error."""
    conn.execute(
        """
        UPDATE pairs SET feedback = ? WHERE source = 'lint' AND session_id = ? AND failure_event_id IN
            (SELECT event_id FROM edits WHERE session_id = ? AND call_id = ? AND syntax_error IS NOT NULL
             AND instr(?, syntax_error) > 0)
        """,
        (event.result, event.session_id, event.session_id, event.call_id, event.result),
    )


def _open_test_pair(conn: sqlite3.Connection, event: ToolCallFinished, seq: int) -> None:
    """A failing command after edits: the last edit before it is the failed attempt."""
    row = conn.execute(
        "SELECT max(message_seq) FROM edits WHERE session_id = ? AND message_seq < ?",
        (event.session_id, seq),
    ).fetchone()
    last_edit = row[0] if row else None
    if last_edit is None:
        return
    already = conn.execute(
        "SELECT 1 FROM pairs WHERE session_id = ? AND source = 'test' AND target IS ? AND completion_seq = ?",
        (event.session_id, event.target, last_edit),
    ).fetchone()
    if already:  # the same command failed again with no new edit: still the same failure
        return
    open_pair(
        conn,
        source="test",
        session_id=event.session_id,
        failure_event_id=event.id,
        completion_seq=last_edit,
        anchor_seq=seq,
        feedback=event.result,
        ts=event.ts,
        tool=event.name,
        error_kind=event.error_kind,
        target=event.target,
        closes_on=SAME_COMMAND,
    )


def _close_test_pairs(conn: sqlite3.Connection, event: ToolCallFinished, seq: int) -> None:
    """The command passed: the first edit after its last failure is what made it pass."""
    row = conn.execute(
        """
        SELECT max(anchor_seq) FROM pairs
        WHERE session_id = ? AND closes_on = ? AND target IS ? AND anchor_seq < ?
        """,
        (event.session_id, SAME_COMMAND, event.target, seq),
    ).fetchone()
    if row is None or row[0] is None:
        return
    fix = conn.execute(
        "SELECT min(message_seq) FROM edits WHERE session_id = ? AND message_seq > ? AND message_seq < ?",
        (event.session_id, row[0], seq),
    ).fetchone()[0]
    if fix is None:  # passed without any new edit (a flaky command): nothing to learn from
        return
    conn.execute(
        """
        UPDATE pairs SET correction_seq = ?, correction_event_id = ?, correction_call_id = ?, corrected_at = ?,
            closes_on = NULL
        WHERE session_id = ? AND closes_on = ? AND target IS ? AND anchor_seq < ?
        """,
        (fix, event.id, event.call_id, event.ts, event.session_id, SAME_COMMAND, event.target, fix),
    )


def on_edit(conn: sqlite3.Connection, event: EditApplied, seq: int | None) -> None:
    if seq is None:
        return
    paths = [p for p in (event.path, event.new_path) if p]
    if event.syntax_error is None and event.kind != "delete":
        marks = ",".join("?" * len(paths))
        conn.execute(
            f"""
            UPDATE pairs SET correction_seq = ?, correction_event_id = ?, correction_call_id = ?, corrected_at = ?,
                closes_on = NULL
            WHERE session_id = ? AND closes_on = ? AND anchor_seq < ? AND target IN ({marks})
            """,
            (seq, event.id, event.call_id, event.ts, event.session_id, SAME_FILE, seq, *paths),
        )
        return
    if event.syntax_error is not None:
        open_pair(
            conn,
            source="lint",
            session_id=event.session_id,
            failure_event_id=event.id,
            completion_seq=seq,
            feedback=f"After this edit {event.new_path or event.path} no longer parses: {event.syntax_error}",
            ts=event.ts,
            tool=tool_of_call(conn, event.session_id, event.call_id),
            error_kind="syntax_error",
            target=event.new_path or event.path,
            closes_on=SAME_FILE,
        )


def on_review(conn: sqlite3.Connection, event: EditReviewed) -> None:
    """A rejected or hand-corrected edit becomes a `user` pair."""
    if event.decision == "accepted":
        return
    edit = conn.execute("SELECT message_seq, call_id, after_hash FROM edits WHERE id = ?", (event.edit_id,)).fetchone()
    if edit is None or edit[0] is None:
        return
    seq, call_id, after_hash = edit
    tool = tool_of_call(conn, event.session_id, call_id)
    note = f" Their comment: {event.comment}" if event.comment else ""
    correction = None
    if event.decision == "rejected":
        feedback = f"The user rejected your edit to {event.path}.{note}"
    else:
        after = conn.execute("SELECT content FROM blobs WHERE hash = ?", (after_hash,)).fetchone()
        change = unified_diff(event.path, after[0] if after else "", event.user_content or "")
        feedback = (
            f"The user corrected your edit to {event.path} by hand.{note}\nTheir changes to your version:\n{change}"
        )
        correction = {"role": "assistant", "content": event.user_content or ""}
    open_pair(
        conn,
        source="user",
        session_id=event.session_id,
        failure_event_id=event.id,
        completion_seq=seq,
        feedback=feedback,
        ts=event.ts,
        tool=tool,
        error_kind=event.decision,
        target=event.path,
        correction=correction,
    )


def tool_of_call(conn: sqlite3.Connection, session_id: str, call_id: str | None) -> str | None:
    row = conn.execute(
        "SELECT name FROM tool_calls WHERE session_id = ? AND call_id = ? ORDER BY started_at DESC LIMIT 1",
        (session_id, call_id),
    ).fetchone()
    return row[0] if row else None
