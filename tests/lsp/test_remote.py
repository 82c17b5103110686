"""The session in a child process (agent.remote), driven directly, as the language server drives it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agent.config import Settings
from agent.protocol import (
    ApprovalDecision,
    ContextRef,
    CorrectEdit,
    Interrupt,
    ReviewEdit,
    ReviewFile,
    ToolCallFinished,
    Undo,
    UserInput,
    op_from_dict,
)
from agent.remote import RemoteSession, WorkerStopped
from agent.review import ReviewError
from host.worker import SpareWorker
from lsp_server.worker import WORKER, open_params
from tests.conftest import call, turn


def test_ops_round_trip_through_json() -> None:
    ops = [
        UserInput(text="fix it", context=(ContextRef(path="app.py", start_line=2, end_line=3, note="E1"),)),
        ApprovalDecision(request_id="r1", approved=False, comment="not that file"),
        Interrupt(),
        ReviewEdit(edit_id="e1", accepted=False, comment="keep it"),
        ReviewFile(path="app.py", accepted=True),
        CorrectEdit(path="app.py", user_content="x = 1\n"),
        Undo(),
    ]
    for op in ops:
        assert op_from_dict(json.loads(json.dumps(op.to_dict()))) == op
    with pytest.raises(ValueError, match="unknown op type 'nudge'"):
        op_from_dict({"type": "nudge"})


@pytest.mark.timeout(180)
async def test_a_remote_turn_reads_unsaved_buffers_and_agent_errors_keep_their_class(
    git_repo: Path, tmp_path: Path, script
) -> None:
    model = script(turn(call("read_file", {"path": "app.py"})), {"content": "done", "tool_calls": []})
    settings = Settings(model=model, approval="full-auto", db=str(tmp_path / "f.db"), repo_map_tokens=0)
    remote = SpareWorker(WORKER, git_repo).take()
    events = []
    remote.subscribe(events.append)
    try:
        info = await remote.open(open_params(git_repo, settings))
        assert info["recording"] == str(tmp_path / "f.db") and remote.id == info["session_id"]
        for n in range(3):  # a burst of keystrokes: the last one is what the turn reads
            remote.overlay.set("app.py", f"UNSAVED = {n}\n", n + 2)
        finished = await remote.run(UserInput(text="read app.py"))
        assert finished.reason == "answered"
        (read,) = [e for e in events if isinstance(e, ToolCallFinished)]
        assert "UNSAVED = 2" in read.result
        assert remote.last_turn_changes() == []
        with pytest.raises(ReviewError, match="did not change app.py"):
            await remote.submit(ReviewFile(path="app.py", accepted=False))
    finally:
        await remote.close()
    assert not remote.alive


async def test_a_child_that_exits_at_once_is_reported(git_repo: Path) -> None:
    stops = []
    remote = RemoteSession([sys.executable, "-c", "import sys; sys.exit(3)"], git_repo, on_stop=stops.append)
    with pytest.raises(WorkerStopped, match=r"the agent's process stopped \(exit status 3\)"):
        await remote.open({})
    assert stops == ["the agent's process stopped (exit status 3)"]
    remote.interrupt()  # a notification to a stopped child is dropped, not an error


async def test_a_child_that_cannot_start_is_reported(git_repo: Path, tmp_path: Path) -> None:
    remote = RemoteSession([str(tmp_path / "no-such-python")], git_repo)
    with pytest.raises(WorkerStopped, match="could not start"):
        await remote.open({})
