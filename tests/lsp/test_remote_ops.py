"""The user's verdicts are Ops: review, correction and undo sent to the session in the language
server's worker process (agent.remote over agent.session_server) produce the same events as sent to
the same session in this process, and the store records each of them and reads it back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.config import Settings
from agent.interfaces import SessionClient
from agent.protocol import (
    CorrectEdit,
    EditApplied,
    EditReviewed,
    Event,
    Op,
    ReviewEdit,
    ReviewFile,
    TurnUndone,
    Undo,
    UserInput,
    event_from_dict,
)
from feedback_store import open_store
from host.worker import SpareWorker
from lsp_server.worker import WORKER, open_hosted, open_params
from tests.conftest import call, turn

# Fields that differ between any two runs whatever the transport: when and how long.
VOLATILE = {"ts", "latency_ms", "duration_ms"}
# Fields that hold ids made afresh in each run: compared by which earlier id they repeat.
IDS = {"id", "session_id", "cause_id", "edit_id", "request_id"}


def _comparable(events: list[Event]) -> list[dict[str, Any]]:
    """The events without volatile fields, each fresh id replaced by the order it first appeared in,
    so that what refers to what is compared too."""
    seen: dict[str, int] = {}
    out = []
    for event in events:
        data = {k: v for k, v in event.to_dict().items() if k not in VOLATILE}
        for key in IDS & data.keys():
            if data[key] is not None:
                data[key] = f"id#{seen.setdefault(data[key], len(seen))}"
        out.append(data)
    return out


async def _verdicts(session: SessionClient) -> tuple[list[Event], list[Event | None]]:
    """Run one turn, then review, correct and undo it, all as Ops: (the events, the ops' replies)."""
    events: list[Event] = []
    session.subscribe(events.append)
    await session.run(UserInput(text="greet less and take notes"))
    app_edit = next(e for e in events if isinstance(e, EditApplied) and e.path == "app.py")
    ops: list[Op] = [
        ReviewEdit(edit_id=app_edit.edit_id, accepted=False, comment="keep Hello"),
        ReviewFile(path="notes.txt", accepted=True),
        CorrectEdit(path="notes.txt", user_content="n\nmore\n"),
        CorrectEdit(path="notes.txt", user_content="n\n"),  # the agent's own version: nothing to record
        Undo(),
    ]
    replies = [await session.submit(op) for op in ops]
    return events, replies


def _recorded(db: Path, session_id: str) -> list[Event]:
    with open_store(db) as store:
        return [event_from_dict(row) for row in store.events(session_id)]


@pytest.mark.timeout(180)
async def test_verdicts_as_ops_over_the_worker_give_the_events_they_give_in_process(
    git_repo: Path, tmp_path: Path, script
) -> None:
    model = script(
        turn(
            call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Hi"}, "c1"),
            call("create_file", {"path": "notes.txt", "content": "n\n"}, "c2"),
        ),
        turn(call("finish", {"summary": "done"}, "c3")),
    )
    # Both sides record into one store, with lessons off: the second must not be shown the first's.
    settings = Settings(model=model, approval="full-auto", db=str(tmp_path / "f.db"), repo_map_tokens=0, lessons=False)
    original = (git_repo / "app.py").read_text()

    hosted = open_hosted(git_repo, settings)
    try:
        here, here_replies = await _verdicts(hosted.session)
    finally:
        await hosted.session.close()
        hosted.close()
    assert (git_repo / "app.py").read_text() == original and not (git_repo / "notes.txt").exists()

    remote = SpareWorker(WORKER, git_repo).take()
    try:
        await remote.open(open_params(git_repo, settings))
        there, there_replies = await _verdicts(remote)
    finally:
        await remote.close()
    assert (git_repo / "app.py").read_text() == original and not (git_repo / "notes.txt").exists()

    assert _comparable(there) == _comparable(here)
    # Each op's reply is the event it emitted, on both sides of the wire.
    assert [r.to_dict() if r else None for r in there_replies] == [
        next(e.to_dict() for e in there if e.id == r.id) if r else None for r in there_replies
    ]
    kinds = [type(r).__name__ if r else None for r in here_replies]
    assert kinds == ["EditReviewed", "EditReviewed", "EditReviewed", None, "TurnUndone"]
    assert [r.decision for r in here_replies[:3] if isinstance(r, EditReviewed)] == [
        "rejected",
        "accepted",
        "corrected",
    ]
    assert isinstance(here_replies[-1], TurnUndone) and here_replies[-1].paths == ["notes.txt"]  # app.py: rejected

    # The store holds every verdict of both sessions, and reads each back as it was emitted.
    for session_events in (here, there):
        verdicts = [e for e in session_events if isinstance(e, (EditReviewed, TurnUndone))]
        recorded = _recorded(tmp_path / "f.db", session_events[0].session_id)
        assert [e for e in recorded if isinstance(e, (EditReviewed, TurnUndone))] == verdicts
