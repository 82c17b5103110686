"""Plans sent back as feedback pairs. A plan-mode turn ends with a plan (agent.plan_mode); when the
user sends it back, the plan is the failed reply, their reason the feedback, and the next plan the
session proposes — or, once a plan is approved, its first edit — the correction. Like every
function of the recording, these run inside the recorder's write transaction."""

from __future__ import annotations

import sqlite3

from agent.protocol import EditApplied, PlanProposed, PlanReviewed
from feedback_store.recording.pairs import open_pair
from feedback_store.rows import NEXT_PLAN, SENT_BACK


def on_plan_proposed(conn: sqlite3.Connection, event: PlanProposed) -> None:
    seq = _message_seq(conn, event.session_id, event.message_id)
    if seq is not None:
        _close(conn, event.session_id, seq, event.id, None, event.ts)


def on_plan_reviewed(conn: sqlite3.Connection, event: PlanReviewed) -> None:
    """A plan sent back opens a `user` pair on the reply that held it."""
    if event.approved:
        return
    row = conn.execute(  # a plan names the reply that holds it as its cause
        "SELECT cause_id FROM events WHERE id = ? AND session_id = ? AND type = ?",
        (event.plan_id, event.session_id, PlanProposed.type),
    ).fetchone()
    seq = _message_seq(conn, event.session_id, row[0] if row else None)
    if seq is None:  # the plan's reply was never recorded: nothing to train on
        return
    open_pair(
        conn,
        source="user",
        session_id=event.session_id,
        failure_event_id=event.id,
        completion_seq=seq,
        feedback=f"The user sent your plan back. Their reason: {event.comment or '(none given)'}",
        ts=event.ts,
        tool=None,
        error_kind=SENT_BACK,
        closes_on=NEXT_PLAN,
    )


def on_edit(conn: sqlite3.Connection, event: EditApplied, seq: int | None) -> None:
    """An edit that parses, made after a plan went back, implements the plan's revision."""
    if seq is not None and event.syntax_error is None:
        _close(conn, event.session_id, seq, event.id, event.call_id, event.ts)


def _close(conn: sqlite3.Connection, session_id: str, seq: int, event_id: str, call_id: str | None, ts: float) -> None:
    conn.execute(
        """
        UPDATE pairs SET correction_seq = ?, correction_event_id = ?, correction_call_id = ?, corrected_at = ?,
            closes_on = NULL
        WHERE session_id = ? AND closes_on = ? AND anchor_seq < ?
        """,
        (seq, event_id, call_id, ts, session_id, NEXT_PLAN, seq),
    )


def _message_seq(conn: sqlite3.Connection, session_id: str, message_event_id: str | None) -> int | None:
    if message_event_id is None:
        return None
    row = conn.execute(
        "SELECT seq FROM messages WHERE session_id = ? AND event_id = ?", (session_id, message_event_id)
    ).fetchone()
    return row[0] if row else None
