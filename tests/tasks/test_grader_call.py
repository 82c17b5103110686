"""The grader's run is recorded as a run_command call like the agent's own: its arguments read, its
tool's roles and its exit status on the events, so the store needs no text to know how it ended."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from agent.protocol import SessionStarted
from agent.tools import run_command
from feedback_store import Recorder, open_store
from tasks.rollout import grader_events

TASK = SimpleNamespace(test_cmd=["pytest", "-q"], FAIL_TO_PASS=("tests/test_a.py::test_new",), PASS_TO_PASS=())


def result(reward: float) -> SimpleNamespace:
    passed = "passed" if reward else "failed"
    return SimpleNamespace(
        reward=reward,
        f2p_pass_fraction=reward,
        p2p_pass_fraction=1.0,
        outcomes={"tests/test_a.py::test_new": passed},
        output="1 failed" if not reward else "1 passed",
        seconds=0.5,
    )


def test_a_failing_grade_is_a_command_that_exited_non_zero(tmp_path: Path) -> None:
    started, finished = grader_events("s1", TASK, result(0.0), step=3)
    assert started.args == {"command": "pytest -q"} and started.target == "pytest -q"
    assert started.call_roles == run_command.roles
    assert (finished.ok, finished.error_kind, finished.exit_code, finished.target) == (
        False,
        "exit_status",
        1,
        "pytest -q",
    )
    assert "[exit code 1]" in finished.result
    store = open_store(tmp_path / "f.db")
    session = SessionStarted(session_id="s1", workspace="/w", model="m", frontend="cli", system_prompt="", tools=[])
    Recorder(store).record_many([session, started, finished])
    rows = store.query("SELECT status, error_kind, target FROM tool_calls WHERE session_id = 's1'")
    assert rows == [{"status": "error", "error_kind": "exit_status", "target": "pytest -q"}]
    store.close()


def test_a_passing_grade_exits_zero() -> None:
    _, finished = grader_events("s2", TASK, result(1.0), step=3)
    assert (finished.ok, finished.error_kind, finished.exit_code) == (True, None, 0)
