"""Opening a recorded session the one way (host.session): the caller's choice for a database that
cannot be opened, a caller's store kept open, a task's config on the recorded start, and a close that
closes what was opened."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent.config import Settings
from agent.protocol import UserInput
from feedback_store import StoreError, open_store
from host.session import IfNoStore, open_recorded
from tests.conftest import call, turn


def _settings(script, db: Path) -> Settings:
    model = script(turn(call("read_file", {"path": "app.py"})), {"content": "done", "tool_calls": []})
    return Settings(model=model, approval="full-auto", db=str(db), repo_map_tokens=0)


def test_a_store_that_cannot_be_opened_is_refused_before_anything_runs(git_repo: Path, tmp_path: Path, script) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()  # a folder where the database file should be
    with pytest.raises(StoreError, match="is a folder"):
        open_recorded(git_repo, _settings(script, folder), frontend="test", if_no_store=IfNoStore.REFUSE)


def test_a_store_that_cannot_be_opened_leaves_the_session_unrecorded_and_says_why(
    git_repo: Path, tmp_path: Path, script
) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    hosted = open_recorded(git_repo, _settings(script, folder), frontend="test", if_no_store=IfNoStore.UNRECORDED)
    try:
        finished = asyncio.run(hosted.session.run(UserInput(text="read app.py")))
    finally:
        assert hosted.close() == []
    assert finished.reason == "answered"
    assert hosted.recording is None and hosted.recording_at is None and "is a folder" in (hosted.why_not or "")
    assert [w.startswith("teachback is not recording feedback:") for w in hosted.warnings] == [True]


def test_a_recorded_session_carries_the_callers_config_and_close_closes_the_store(
    git_repo: Path, tmp_path: Path, script
) -> None:
    db = tmp_path / "f.db"
    shown = []
    hosted = open_recorded(
        git_repo,
        _settings(script, db),
        frontend="test",
        if_no_store=IfNoStore.REFUSE,
        config={"task": {"instance_id": "t-1"}},
        then=shown.append,
    )
    assert hosted.recording_at == str(db)
    asyncio.run(hosted.session.run(UserInput(text="read app.py")))
    assert hosted.close() == [] and hosted.store is not None and hosted.owns_store is False  # closed
    with open_store(db) as store:
        events = store.events(hosted.session.id)
    assert events[0]["type"] == "session_started" and events[0]["config"]["task"] == {"instance_id": "t-1"}
    assert {event["id"] for event in events} <= {event.id for event in shown}  # `then` saw what was recorded


def test_a_callers_store_stays_open_and_resume_reads_the_history(git_repo: Path, tmp_path: Path, script) -> None:
    settings = _settings(script, tmp_path / "f.db")
    with open_store(settings.db_path()) as store:
        first = open_recorded(git_repo, settings, frontend="test", if_no_store=IfNoStore.REFUSE, store=store)
        asyncio.run(first.session.run(UserInput(text="read app.py")))
        first.close()
        assert store.conversation(first.session.id)  # the store is still open, and holds the session
    again = open_recorded(
        git_repo,
        settings,
        frontend="test",
        if_no_store=IfNoStore.UNRECORDED,
        session_id=first.session.id,
        resume=True,
    )
    try:
        assert again.warnings == [] and again.session.messages[1:] == first.session.messages[1:]
    finally:
        again.close()
