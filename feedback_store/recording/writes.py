"""The writer's primitives, shared by the recorder and the event handlers: a savepoint per event and
per step (so one failing step is undone and noted, never the events after it), the events row, and
content-addressed blobs."""

from __future__ import annotations

import contextvars
import logging
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from agent.protocol import Event
from feedback_store.content.hashing import content_hash

log = logging.getLogger(__name__)

NOTE_CHARS = 500


# The database itself failing (locked, read-only, full, I/O): the whole write waits and is retried.
# Any other error comes from an event (a value of the wrong type, a constraint, a bug in a check)
# and would fail again: that event, or the step of it that failed, is set aside and the rest goes on.
DATABASE_DOWN = (sqlite3.OperationalError,)


# False while a write records its events with no savepoint per event or step.
GUARDED = contextvars.ContextVar("recorder_guarded", default=True)


@contextmanager
def savepoint(conn: sqlite3.Connection, name: str) -> Iterator[None]:
    """A savepoint; none while unguarded (a failure then rolls back the whole write)."""
    if not GUARDED.get():
        yield
        return
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        conn.execute(f"ROLLBACK TO {name}")
        raise
    finally:
        conn.execute(f"RELEASE {name}")


def run_step(
    conn: sqlite3.Connection,
    event: Event,
    stage: str,
    fn: Callable[[], object],
    undone: Callable[[], object] | None = None,
) -> None:
    """One step of recording `event` (a table's rows, a check, a pair) in its own savepoint. A step
    that fails on this event is undone (then `undone` is called), noted in `recording_notes` and
    logged once; the event and its other steps are still written, and so is every event after it."""
    if not GUARDED.get():
        fn()
        return
    try:
        with savepoint(conn, "recorder_step"):
            fn()
    except DATABASE_DOWN:
        raise
    except Exception as exc:
        log.warning(
            "recording %s %s: the %s step failed (%r) and was skipped; the event is recorded with a note "
            "(run with -v for details)",
            event.type,
            event.id,
            stage,
            exc,
        )
        log.debug("the %s step failed", stage, exc_info=True)
        if undone is not None:
            undone()
        note_problem(conn, event, stage, f"{type(exc).__name__}: {exc}")


def note_problem(conn: sqlite3.Connection, event: Event, stage: str, problem: str) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO recording_notes (id, session_id, event_id, stage, problem, ts) VALUES (?, ?, ?, ?, ?, ?)",
        (f"{event.id}-{stage}", event.session_id, event.id, stage, ascii(problem)[1:-1][:NOTE_CHARS], event.ts),
    )


def insert_event(conn: sqlite3.Connection, event: Event, stored: str) -> int:
    return conn.execute(
        "INSERT OR IGNORE INTO events (id, session_id, type, ts, cause_id, json) VALUES (?, ?, ?, ?, ?, ?)",
        (event.id, event.session_id, event.type, event.ts, event.cause_id, stored),
    ).rowcount


def named_blob(row: dict[str, Any], field: str, marker: str) -> str | None:
    """The hash of the blob an events row names for the event's `field` (a large value, kept with
    `marker`): the table rows name the same blob, already written."""
    value = row.get(field)
    if isinstance(value, dict) and len(value) == 1 and marker in value:
        return value[marker]
    return None


def put_blob(conn: sqlite3.Connection, kind: str, text: str | None) -> str | None:
    if text is None:
        return None
    key = content_hash(text)
    insert_blob(conn, key, kind, text)
    return key


def insert_blob(conn: sqlite3.Connection, key: str, kind: str, text: str) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO blobs (hash, kind, size, content) VALUES (?, ?, ?, ?)", (key, kind, len(text), text)
    )
