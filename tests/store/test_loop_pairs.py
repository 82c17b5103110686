"""Pairs for a model stuck repeating itself, and for a command that cannot run at all."""

from __future__ import annotations

from agent.config import Settings
from agent.protocol import UserInput
from agent.runtime import open_session
from feedback_store import Recorder, open_store
from tests.conftest import call, turn


async def _record(git_repo, script_model, tmp_path):
    store = open_store(tmp_path / "pairs.db")
    session = open_session(git_repo, Settings(model=script_model, approval="full-auto"))
    session.subscribe(Recorder(store))
    await session.run(UserInput(text="go"))
    return store.pairs()


async def test_a_repeated_call_is_a_tool_pair_fixed_by_the_next_different_call(git_repo, script, tmp_path):
    read = call("read_file", {"path": "app.py"})
    model = script(turn(read), turn(read), turn(read), turn(call("read_file", {"path": "util.py"})))
    pairs = await _record(git_repo, model, tmp_path)
    assert [(p.source, p.error_kind) for p in pairs] == [("tool", "repeated_call")] * 2
    for pair in pairs:
        assert "Do not repeat it" in pair.feedback
        assert pair.correction is not None
        assert pair.correction["tool_calls"][0]["function"]["arguments"] == '{"path": "util.py"}'


async def test_command_not_found_is_a_tool_pair_not_a_test_pair(git_repo, script, tmp_path):
    model = script(
        turn(call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Hey"})),
        turn(call("run_command", {"command": "no-such-test-runner -q"})),
        turn(call("run_command", {"command": "no-such-test-runner -q"})),
    )
    pairs = await _record(git_repo, model, tmp_path)
    assert [(p.source, p.error_kind, p.target) for p in pairs][:1] == [
        ("tool", "exit_status", "no-such-test-runner -q")
    ]
    assert "[exit code 127]" in pairs[0].feedback
    assert all(p.source != "test" for p in pairs)


async def test_a_wrong_path_and_an_unknown_tool_are_corrected_by_the_call_that_then_worked(git_repo, script, tmp_path):
    model = script(
        turn(call("read_file", {"path": "/tmp/elsewhere/app.py"})),  # outside the workspace
        turn(call("open_file", {"path": "app.py"})),  # no such tool
        turn(call("read_file", {"path": "src/app.py"})),  # not found: fails, so it corrects nothing
        turn(call("read_file", {"path": "app.py"})),
    )
    pairs = await _record(git_repo, model, tmp_path)
    kinds = {p.error_kind: p for p in pairs}
    assert set(kinds) == {"outside_workspace", "unknown_tool", "not_found"}
    for pair in pairs:  # each is corrected by the read of the real file, never by the failing read
        assert pair.correction["tool_calls"][0]["function"]["arguments"] == '{"path": "app.py"}'
