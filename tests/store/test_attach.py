"""`feedback_store.attach`, the one way every host records a session: the session never sees a
StoreError, the person is told once when recording fails and again when it catches up, and
`close()` writes what waited and names what could not be written."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent.config import Settings
from agent.protocol import AssistantDelta, UserInput
from agent.runtime import open_session
from feedback_store import attach, open_store
from tests.conftest import call, turn
from tests.store.test_recording_failures import LockHolder, recorded_ids


def scripted_session(git_repo: Path, script, tmp_path: Path):
    model = script(turn(call("read_file", {"path": "app.py"})), turn(call("finish", {"summary": "read it"})))
    settings = Settings(model=model, approval="full-auto", repo_map_tokens=0, db=str(tmp_path / "unused.db"))
    return open_session(git_repo, settings)


def test_a_locked_database_never_stops_the_session_and_close_writes_every_event(git_repo, script, tmp_path):
    db = tmp_path / "feedback.db"
    open_store(db).close()
    store = open_store(db, timeout=0.2)
    session = scripted_session(git_repo, script, tmp_path)
    said: list[str] = []
    recording = attach(session, store, warn=said.append)
    emitted = []
    session.subscribe(emitted.append)

    holder = LockHolder(db)
    finished = asyncio.run(session.run(UserInput(text="read app.py")))
    assert finished.reason == "finished"  # the turn ran to its end with the database locked throughout
    assert len(said) == 1 and said[0].startswith("recording is failing") and "locked" in said[0]
    stored = [e for e in emitted if not isinstance(e, AssistantDelta)]
    assert recording.flush(wait=0.1) == stored  # still locked: every event waits, in order
    assert recording.error is not None

    holder.release()
    assert recording.close() == []
    assert said[-1] == f"recording caught up: every event is in {db}."
    assert recorded_ids(db) == {e.id for e in stored}
    asyncio.run(session.close())
    store.close()


def test_close_detaches_and_names_what_could_not_be_written(git_repo, script, tmp_path):
    db = tmp_path / "feedback.db"
    open_store(db).close()
    store = open_store(db, timeout=0.2)
    session = scripted_session(git_repo, script, tmp_path)
    recording = attach(session, store, warn=lambda message: None)
    holder = LockHolder(db)
    asyncio.run(session.run(UserInput(text="read app.py")))
    unrecorded = recording.close()  # the lock outlasts the store's wait
    assert unrecorded and all(not isinstance(e, AssistantDelta) for e in unrecorded)
    holder.release()
    before = recorded_ids(db)
    asyncio.run(session.run(UserInput(text="again")))  # detached: nothing more is recorded
    assert recorded_ids(db) == before == set()
    asyncio.run(session.close())
    store.close()
