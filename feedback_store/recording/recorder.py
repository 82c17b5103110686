"""The Recorder: a session subscriber that writes each event the moment it is emitted.

Each event is one IMMEDIATE transaction, committed before the call returns, so a crash or a kill
loses nothing already emitted. Events are keyed by id: replaying a log writes no duplicates.
Streaming deltas (AssistantDelta) are not stored: the AssistantMessage that follows them carries
the whole text.

When the database refuses a write (locked past the store's wait, turned read-only, disk full) the
event is kept in memory, in order, and written with the next event or by `flush()`: nothing is
dropped while the process lives, and the failure is reported (raised, or passed to `on_error`).

One event can never stop the recording of the next: each event, and each step derived from it (its
table rows, the reward-hacking checks, its feedback pair), runs in its own savepoint. A step that
fails on an event is undone and noted in `recording_notes` (which step, and why), the event row and
its other steps are kept, and the events after it are written as usual. Since almost nothing
fails, a write first records its events with no savepoint at all; only when something fails is
that write rolled back and done again with each event and step in a savepoint of its own.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterable, Sequence

from agent.protocol import LONE_SURROGATE, AssistantDelta, Event, ModelUsage, event_from_dict
from feedback_store.content import event_blobs
from feedback_store.content.hashing import row_json
from feedback_store.errors import StoreError
from feedback_store.recording.handlers import HANDLERS, record_usage
from feedback_store.recording.writes import (
    DATABASE_DOWN,
    GUARDED,
    insert_event,
    note_problem,
    put_blob,
    run_step,
    savepoint,
)
from feedback_store.store import Store

log = logging.getLogger(__name__)


class Recorder:
    """`session.subscribe(Recorder(store))` records everything the session emits.

    `then` sees each event once it is committed (deltas at once), so what a frontend shows is
    already durable; while recording is failing it sees them at once, the failure having been
    reported. `on_error` is told when recording starts failing (without it the StoreError is
    raised to the emitter) and when an event is refused for good.
    """

    def __init__(
        self,
        store: Store,
        *,
        then: Callable[[Event], None] | None = None,
        on_error: Callable[[StoreError], None] | None = None,
    ) -> None:
        self.store = store
        self.then = then
        self.on_error = on_error
        self.pending: list[Event] = []  # not yet committed, oldest first
        self.lost: list[Event] = []  # refused by the database itself (a constraint), never to be written
        self.error: StoreError | None = None  # why the pending events wait, while they do
        self._shown = 0  # how many of `pending` `then` has already seen

    def __call__(self, event: Event) -> None:
        if isinstance(event, AssistantDelta):
            self._show([event])
            return
        self.pending.append(event)
        self._write(wait=0 if self.error else None)  # while failing, one quick try per event

    def flush(self, wait: float | None = None) -> list[Event]:
        """Write what is pending, waiting up to `wait` s (default: the store's); return what is not."""
        if self.pending:
            self._write(wait)
        return list(self.pending)

    def _write(self, wait: float | None) -> None:
        try:
            refused = _write_events(self.store, self.pending, wait)
        except StoreError as exc:
            self._failed(exc)
            return
        done, shown = self.pending, self._shown
        self.pending, self._shown, self.error = [], 0, None
        self._show(done[shown:])
        if refused:
            self.lost += refused
            self._report(
                StoreError(
                    f"The feedback database {self.store.path} refused {len(refused)} event(s) "
                    f"({', '.join(e.type for e in refused)}); they are not recorded. This is a teachback "
                    "bug: please report it with the log (-v)."
                )
            )

    def _failed(self, exc: StoreError) -> None:
        first, self.error = self.error is None, exc
        self._show(self.pending[self._shown :])
        self._shown = len(self.pending)
        if first:
            self._report(
                StoreError(
                    f"{exc} {len(self.pending)} event(s) not yet recorded are kept in memory and written "
                    "as soon as the database takes writes again."
                ),
                cause=exc,
            )

    def _report(self, error: StoreError, cause: BaseException | None = None) -> None:
        if self.on_error is None:
            raise error from cause
        self.on_error(error)

    def _show(self, events: Sequence[Event]) -> None:
        if self.then is None:
            return
        for event in events:  # one event a frontend cannot show must not hide the ones after it
            try:
                self.then(event)
            except Exception as exc:
                log.warning("showing %s %s failed: %r (run with -v for details)", event.type, event.id, exc)
                log.debug("showing %s failed", event.type, exc_info=True)

    def record_many(self, events: Iterable[Event]) -> list[Event]:
        """Record a whole log in one transaction (imports and replays); return the events that
        could not be written at all."""
        return _write_events(self.store, [e for e in events if not isinstance(e, AssistantDelta)])


class _Redo(Exception):
    """Recording a write's events at once failed on one of them (not the database): roll the write
    back and record each event and step in a savepoint of its own."""


def _write_events(store: Store, events: Sequence[Event], wait: float | None = None) -> list[Event]:
    """Record `events` in one write transaction; return those that could not be written at all.
    First at once, with no savepoint (nearly always nothing fails: the same rows for a fraction
    of the statements); should an event fail, the write is rolled back and done again guarded."""
    try:
        with store.write(wait=wait) as conn:
            _record_at_once(conn, events)
        return []
    except _Redo:
        log.debug("recording %d event(s) at once failed; recording each on its own", len(events), exc_info=True)
    with store.write(wait=wait) as conn:
        return _record_each(conn, events)


def _record_at_once(conn: sqlite3.Connection, events: Sequence[Event]) -> None:
    token = GUARDED.set(False)
    try:
        for event in events:
            record(conn, event)
    except DATABASE_DOWN:
        raise
    except Exception as exc:
        raise _Redo from exc
    finally:
        GUARDED.reset(token)


def _record_each(conn: sqlite3.Connection, events: Sequence[Event]) -> list[Event]:
    """Record `events` in the open transaction, each in a savepoint; return those that could not be
    written at all, each undone on its own so it cannot keep the others out. The database failing
    propagates and the transaction rolls back."""
    refused = []
    for event in events:
        try:
            with savepoint(conn, "recorder_event"):
                record(conn, event)
        except DATABASE_DOWN:
            raise
        except Exception as exc:
            log.warning("%s %s could not be recorded: %r (run with -v for details)", event.type, event.id, exc)
            log.debug("recording %s failed", event.type, exc_info=True)
            refused.append(event)
    return refused


def record(conn: sqlite3.Connection, event: Event) -> bool:
    """Write one event and everything derived from it; False when it was already recorded. Text that
    SQLite cannot store (a lone surrogate the model sent) is written with U+FFFD in its place, noted."""
    if not GUARDED.get():  # a failure, that one too, rolls the write back to be done again guarded
        return _record(conn, event)
    try:
        with savepoint(conn, "recorder_text"):
            return _record(conn, event)
    except UnicodeEncodeError:
        clean, replaced = _without_surrogates(event)
        inserted = _record(conn, clean)
        if inserted:
            note_problem(conn, event, "text", f"{replaced} lone UTF-16 surrogate(s) stored as U+FFFD")
        return inserted


def _record(conn: sqlite3.Connection, event: Event) -> bool:
    if isinstance(event, ModelUsage):
        return record_usage(conn, event)
    row = event_blobs.slim(conn, event.to_dict(), put_blob)
    if not insert_event(conn, event, row_json(row)):
        return False
    handler = HANDLERS.get(type(event))
    if handler is not None:
        run_step(conn, event, event.type, lambda: handler(conn, event, row))
    return True


def _without_surrogates(event: Event) -> tuple[Event, int]:
    """`event` with every lone surrogate in its text replaced by U+FFFD (as exports write them), and
    how many there were."""
    text, count = LONE_SURROGATE.subn("\ufffd", json.dumps(event.to_dict(), ensure_ascii=False))
    return event_from_dict(json.loads(text)), count
