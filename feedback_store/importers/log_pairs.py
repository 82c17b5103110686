"""Feedback pairs an imported log holds that the recorder cannot see in it (feedback_store.importers.imports):
a reply the user interrupted and then corrected in words, and a failing command that passed again
after an edit. Both run inside the import's write transaction, once per import of a session; their
ids are stable, so importing again adds nothing."""

from __future__ import annotations

import sqlite3

from feedback_store.recording import pairs


def interruption_pair(
    conn: sqlite3.Connection, session_id: str, marker: str, reply: str, words: str, ts: float
) -> None:
    """The user stopped a reply and said what to do instead: a `user` pair on that reply."""
    seq = conn.execute("SELECT seq FROM messages WHERE session_id = ? AND event_id = ?", (session_id, reply)).fetchone()
    if seq is None:
        return
    call = conn.execute(
        "SELECT name, target FROM tool_calls WHERE session_id = ? AND message_seq = ? ORDER BY started_at LIMIT 1",
        (session_id, seq[0]),
    ).fetchone()
    pairs.open_pair(
        conn,
        source="user",
        session_id=session_id,
        failure_event_id=marker,
        completion_seq=seq[0],
        feedback=f"The user interrupted this reply and said: {words}",
        ts=ts,
        tool=call[0] if call else None,
        error_kind="interrupted",
        target=call[1] if call else None,
    )


def command_pairs(
    conn: sqlite3.Connection, sid: str, command_tools: frozenset[str], edit_tools: frozenset[str]
) -> None:
    """A command that failed (and could run), then passed again after an edit: a `test` pair whose
    failed attempt is the last edit before the failure and whose correction is the first edit after
    it, as the recorder links teachback's own test runs."""
    commands, edits_named = sorted(command_tools), sorted(edit_tools)
    runs = conn.execute(
        f"""SELECT id, name, target, status, error_kind, message_seq, result, finished_at FROM tool_calls
            WHERE session_id = ? AND name IN ({",".join("?" * len(commands)) or "NULL"})
            AND message_seq IS NOT NULL AND status IN ('ok', 'error') ORDER BY message_seq, finished_at""",
        (sid, *commands),
    ).fetchall()
    edits = [
        row[0]
        for row in conn.execute(
            f"""SELECT DISTINCT message_seq FROM tool_calls WHERE session_id = ? AND status = 'ok'
                AND name IN ({",".join("?" * len(edits_named)) or "NULL"}) AND message_seq IS NOT NULL
                ORDER BY message_seq""",
            (sid, *edits_named),
        )
    ]
    for index, (run_id, name, target, status, kind, seq, result, ts) in enumerate(runs):
        if status != "error" or kind != "exit_status" or target is None:
            continue
        passed = next((r for r in runs[index + 1 :] if r[2] == target and r[3] == "ok"), None)
        before = [e for e in edits if e < seq]
        after = [e for e in edits if passed is not None and seq < e < passed[5]]
        if passed is None or not before or not after:
            continue
        same = conn.execute(
            "SELECT 1 FROM pairs WHERE session_id = ? AND source = 'test' AND target IS ? AND completion_seq = ? AND id != ?",
            (sid, target, before[-1], f"{run_id}-test"),
        ).fetchone()
        if same:  # the same command failed again with no new edit: still the same failure
            continue
        pair_id = pairs.open_pair(
            conn,
            source="test",
            session_id=sid,
            failure_event_id=run_id,
            completion_seq=before[-1],
            anchor_seq=seq,
            feedback=result or "",
            ts=ts or 0.0,
            tool=name,
            error_kind="exit_status",
            target=target,
        )
        conn.execute(
            """UPDATE pairs SET correction_seq = ?, correction_event_id = ?, corrected_at = ?
               WHERE id = ? AND correction_seq IS NULL""",
            (after[0], passed[0], passed[7], pair_id),
        )
