"""One event that something cannot handle never stops the recording of the events after it: a
listener beside the recorder that raises, a recording step (a check, a derived row) that fails on
one event, text SQLite cannot store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agent.config import Settings
from agent.protocol import ErrorEvent, Event, ToolCallStarted, UserInput
from agent.runtime import open_session
from feedback_store import Recorder, attach, open_store
from tests.conftest import call, turn
from tests.store.events import FakeSession, with_altered_edit


def stored(db: Path, sql: str, *params) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def record_all(db: Path, events: list[Event]) -> None:
    """Record `events` one by one, as a session emits them; every one must be in the database."""
    with open_store(db) as store:
        recorder = Recorder(store)
        for event in events:
            recorder(event)
        assert recorder.pending == [] and recorder.lost == []
    assert {row[0] for row in stored(db, "SELECT id FROM events")} == {e.id for e in events}


async def test_a_listener_that_raises_does_not_stop_the_recording(git_repo, script, tmp_path):
    db = tmp_path / "feedback.db"
    model = script(
        turn(call("read_file", {"path": "missing.py"})),
        turn(call("read_file", {"path": "app.py"})),
        turn(content="Read it."),
    )
    session = open_session(git_repo, Settings(model=model, approval="full-auto"))
    store = open_store(db)
    recording = attach(session, store)
    emitted: list[Event] = []
    session.subscribe(emitted.append)

    def broken(event: Event) -> None:
        if isinstance(event, ToolCallStarted):
            raise RuntimeError("this listener cannot show tool calls")

    session.subscribe(broken)
    finished = await session.run(UserInput(text="read app.py"))
    assert recording.close(close_store=True) == []
    assert finished.reason == "answered"
    failures = [e for e in emitted if isinstance(e, ErrorEvent) and e.kind == "subscriber"]
    assert len(failures) == 2  # one per tool call, each told once
    ids = {row[0] for row in stored(db, "SELECT id FROM events")}
    assert ids == {e.id for e in emitted if e.type != "assistant_delta"}
    assert stored(db, "SELECT error_kind FROM pairs WHERE target = 'missing.py'") == [("not_found",)]
    assert stored(db, "SELECT reason FROM turns") == [("answered",)]


def test_a_check_that_fails_on_one_event_is_noted_and_the_next_events_are_recorded(tmp_path):
    db = tmp_path / "feedback.db"
    events, odd = with_altered_edit(id="edit-without-diff", edit_id="e2", diff=None)  # the monitor reads the diff
    record_all(db, events)
    (note,) = stored(db, "SELECT event_id, stage, problem FROM recording_notes")
    assert note[:2] == (odd.id, "monitor") and note[2].startswith("TypeError")
    assert ("e2",) in stored(db, "SELECT id FROM edits")  # the edit's own row is kept
    assert stored(db, "SELECT error_kind FROM pairs WHERE target = 'missing.py'") == [("not_found",)]
    assert stored(db, "SELECT count(*) FROM turns WHERE finished_at IS NOT NULL") == [(1,)]


def test_text_sqlite_cannot_store_is_kept_with_replacement_characters(tmp_path):
    db = tmp_path / "feedback.db"
    fake = FakeSession().start().user("go")
    fake.say("partly \ud800 broken")
    fake.call("read_file", {"path": "\udc80.py"}, ok=False, error_kind="not_found", target="\udc80.py")
    record_all(db, fake.finish().events)
    notes = stored(db, "SELECT stage, problem FROM recording_notes")
    assert notes and {stage for stage, _ in notes} == {"text"}
    assert any("\ufffd" in row[0] for row in stored(db, "SELECT message FROM messages"))
    assert stored(db, "SELECT target FROM pairs") == [("\ufffd.py",)]
