"""Distilling lessons: what earlier sessions got wrong and what fixed it, one short lesson per situation.

The recorder's pair writes keep a full-text index current (`pair_search`, triggers of migration
m003) and mark each pair for distillation (`lesson_pairs.pending`). `refresh` distils pending pairs
into `lessons`: one per situation (tool, error kind, target), short, secrets redacted, with what
worked when a correction was recorded. Pairs of flagged sessions and monitor pairs never count.
The book (feedback_store.lessons.book) serves them to sessions.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from typing import Any

from agent.protocol.arguments import read_arguments
from common.text import clip
from feedback_store.content.hashing import canonical_json, content_hash
from feedback_store.pair_reader import correction_of
from feedback_store.redaction.redactor import Redactor
from feedback_store.store import Store

GIST_CHARS, FIX_CHARS, VALUE_CHARS = 140, 160, 60
REFRESH_LIMIT = 5000  # pending pairs distilled when a session starts; the rest the next time
REFRESH_BATCH = 200  # situations per write transaction, so recorders of other sessions wait little
_PROBLEM = re.compile(r"(?i)error|failed|exception|not found|no such|denied")


def lesson_id(situation: tuple[str | None, str | None, str | None]) -> str:
    return "L" + content_hash(canonical_json(list(situation))).split(":", 1)[1][:12]


# -- distillation -------------------------------------------------------------------------------

ELIGIBLE = """p.tool IS ? AND p.error_kind IS ? AND p.target IS ? AND p.source != 'monitor'
    AND NOT EXISTS (SELECT 1 FROM flags f WHERE f.session_id = p.session_id)"""
CORRECTED = "(p.correction_seq IS NOT NULL OR p.correction IS NOT NULL)"


def refresh(store: Store, redactor: Redactor | None = None, limit: int | None = REFRESH_LIMIT) -> int:
    """Distil pending pairs into lessons; return how many pairs were processed."""
    pending = store.query(
        "SELECT lp.pair_id, p.tool, p.error_kind, p.target FROM lesson_pairs lp JOIN pairs p ON p.id = lp.pair_id"
        " WHERE lp.pending = 1 ORDER BY lp.id LIMIT ?",
        (-1 if limit is None else limit,),
    )
    if not pending:
        return 0
    redactor = redactor or Redactor()
    by_situation: dict[tuple, list[str]] = {}
    for row in pending:
        by_situation.setdefault((row["tool"], row["error_kind"], row["target"]), []).append(row["pair_id"])
    situations = sorted(by_situation, key=repr)
    for start in range(0, len(situations), REFRESH_BATCH):
        with store.write() as conn:
            now = time.time()
            for situation in situations[start : start + REFRESH_BATCH]:
                _distill(conn, situation, by_situation[situation], redactor, now)
    return len(pending)


def live_lessons(store: Store) -> list[dict[str, Any]]:
    """The lessons not deleted, pending pairs distilled first, with the fields a wording needs."""
    refresh(store)
    return store.query(
        "SELECT id, tool, error_kind, target, occurrences, feedback, correction FROM lessons WHERE deleted = 0"
    )


def _distill(conn: sqlite3.Connection, situation: tuple, pair_ids: list[str], redactor: Redactor, now: float) -> None:
    ident = lesson_id(situation)
    marks = ",".join("?" * len(pair_ids))
    conn.execute(f"UPDATE lesson_pairs SET pending = 0, lesson_id = ? WHERE pair_id IN ({marks})", (ident, *pair_ids))
    count, corrected, last = conn.execute(
        f"SELECT count(*), sum({CORRECTED}), max(p.created_at) FROM pairs p WHERE {ELIGIBLE}", situation
    ).fetchone()
    if not count:  # every source is flagged (or a monitor finding): nothing to teach
        conn.execute("UPDATE lessons SET occurrences = 0, corrected = 0, updated_at = ? WHERE id = ?", (now, ident))
        return
    best = conn.execute(
        f"""SELECT p.id, p.session_id, p.feedback, p.correction, p.correction_seq, p.correction_call_id
        FROM pairs p WHERE {ELIGIBLE}
        ORDER BY {CORRECTED} DESC, p.created_at DESC, p.id DESC LIMIT 1""",
        situation,
    ).fetchone()
    tool, kind, target = situation
    feedback = redactor.redact(best[2][:2000])
    fix = _fix(conn, best, tool, redactor)
    text = redactor.redact(lesson_text(tool, kind, target, count, gist(feedback), fix))  # the target too
    conn.execute(
        """INSERT INTO lessons (id, key, origin, tool, error_kind, target, text, feedback, correction,
            occurrences, corrected, source_pair, source_session, created_at, updated_at, last_seen)
        VALUES (?, ?, 'distilled', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (id) DO UPDATE SET text = CASE WHEN lessons.edited THEN lessons.text ELSE excluded.text END,
            feedback = excluded.feedback, correction = excluded.correction, occurrences = excluded.occurrences,
            corrected = excluded.corrected, source_pair = excluded.source_pair,
            source_session = excluded.source_session, updated_at = excluded.updated_at, last_seen = excluded.last_seen""",
        (
            ident,
            canonical_json(list(situation)),
            tool,
            kind,
            target,
            text,
            feedback[:1000],
            fix,
            count,
            corrected or 0,
            best[0],
            best[1],
            now,
            now,
            last,
        ),
    )


def _fix(conn: sqlite3.Connection, best: tuple, tool: str | None, redactor: Redactor) -> str | None:
    """What worked, in one line: the correcting call (arguments redacted and shortened)."""
    _, session_id, _, correction, correction_seq, call_id = best

    def message_at(seq: int) -> dict[str, Any] | None:
        row = conn.execute(
            "SELECT message FROM messages WHERE session_id = ? AND seq = ?", (session_id, seq)
        ).fetchone()
        return json.loads(row[0]) if row else None

    message = correction_of(correction, correction_seq, message_at)
    if not message:
        return None
    calls = message.get("tool_calls") or []
    if not calls:
        content = (message.get("content") or "").strip()
        return (
            "the user changed the file by hand"
            if correction is not None
            else one_line(redactor.redact(content), FIX_CHARS) or None
        )
    # The call the recorder linked as the fix; a reply's first call of the failed tool for a pair
    # linked without one (the user's own version, an import).
    fixing = next((c for c in calls if call_id is not None and c.get("id") == call_id), None)
    named = [c.get("function") or {} for c in calls]
    call = (fixing.get("function") or {}) if fixing else next((c for c in named if c.get("name") == tool), named[0])
    # Values are quoted as JSON, whitespace as sent (a lesson says to copy old_text exactly); only a
    # line break, which would split the lesson's line, becomes a space.
    text = clip(f"{call.get('name')}({_short_arguments(call.get('arguments') or '', redactor)})", FIX_CHARS)
    return text.replace("\r", " ").replace("\n", " ")


def _short_arguments(arguments: str, redactor: Redactor) -> str:
    """`key="value", ...` as the call sent them (the concrete working form), long values cut."""
    value = read_arguments(arguments).value  # bounded: the model's text, never parsed unbounded
    if value is None:
        return redactor.redact(arguments)
    value = redactor.redact_value(value)
    shown = [(k, clip(v, VALUE_CHARS) if isinstance(v, str) else v) for k, v in value.items()]
    return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in shown)


# A wrong path the model guessed and then corrected: a habit of the model's, told at the start.
PATH_HABITS = frozenset({"not_found", "outside_workspace"})
# What to keep in mind with a fix, by the kind of failure it fixed (said as what to do).
HABITS = {
    "not_found": "paths are relative to the workspace root",
    "outside_workspace": "paths are relative to the workspace root",
    "no_match": "copy old_text exactly as read_file shows it",
    "schema": "send the arguments the tool's schema names",
}


def lesson_text(tool: str | None, kind: str | None, target: str | None, count: int, what: str, fix: str | None) -> str:
    """Said as what to do, the working form first: a small model copies what a lesson quotes, so
    the failed value comes last, and only where no fix says what to do instead."""
    times = f", {count} times" if count > 1 else ""
    if fix:
        habit = f"; {HABITS[kind]}" if kind in HABITS else ""
        return f"Do this: {fix} (it worked where an earlier {tool or 'call'} failed: {kind or 'error'}{times}{habit})."
    where = f"{tool or 'a reply'} on {target}" if target else (tool or "a reply")
    return f"Check before calling {tool or 'it'} again: {where} failed ({kind or 'error'}{times}): {what}"


def gist(feedback: str) -> str:
    """The part of a failure's feedback that says what went wrong, in one short line."""
    lines = [line.strip() for line in feedback.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].startswith("$ ") and len(lines) > 1:  # a command: its exit code and first problem line
        problem = next((line for line in lines[2:] if _PROBLEM.search(line)), lines[2] if len(lines) > 2 else "")
        return one_line(f"{lines[1]} {problem}", GIST_CHARS)
    return one_line(lines[0], GIST_CHARS)


def one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut[limit // 2 :] else cut) + "…"
