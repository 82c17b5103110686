"""A model going round a short cycle of failing calls is told so, recorded, and stopped as stuck."""

from __future__ import annotations

from agent.config import Settings
from agent.protocol import ToolCallFinished, UserInput
from agent.runtime import open_session
from feedback_store import Recorder, open_store
from tests.conftest import call, turn

READ = call("read_file", {"path": "src/missing.py"})
LIST = call("list_files", {"path": "src/missing.py"})


async def _record(git_repo, model, tmp_path):
    store = open_store(tmp_path / "cycle.db")
    session = open_session(git_repo, Settings(model=model, approval="full-auto"))
    events = []
    session.subscribe(events.append)
    session.subscribe(Recorder(store))
    finished = await session.run(UserInput(text="fix the missing module"))
    return finished, [e for e in events if isinstance(e, ToolCallFinished)], store


async def test_an_a_b_a_b_loop_of_failures_is_stopped_as_stuck_and_recorded(git_repo, script, tmp_path):
    model = script(*[turn(READ if i % 2 == 0 else LIST) for i in range(12)])
    finished, calls, store = await _record(git_repo, model, tmp_path)
    assert finished.reason == "stuck"
    assert "went round the same failing calls" in finished.summary
    assert [c.error_kind for c in calls] == ["not_found", "not_found"] + ["repeated_cycle"] * 3
    assert [c.name for c in calls] == ["read_file", "list_files", "read_file", "list_files", "read_file"]
    assert "going round in a loop" in calls[2].result and "2 calls ago" in calls[2].result
    pairs = store.pairs(session_id=calls[0].session_id)
    assert [(p.source, p.error_kind, p.target) for p in pairs] == (
        [("tool", "not_found", "src/missing.py")] * 2 + [("tool", "repeated_cycle", "src/missing.py")] * 3
    )
    assert all(p.correction is None for p in pairs)  # stopped before anything fixed them
    assert "going round in a loop" in pairs[2].feedback


async def test_a_cycle_pair_is_fixed_by_the_next_new_call(git_repo, script, tmp_path):
    search = call("search", {"pattern": "missing"})
    finished, calls, store = await _record(git_repo, script(turn(READ), turn(LIST), turn(READ), turn(search)), tmp_path)
    assert finished.reason == "answered"
    assert [c.error_kind for c in calls] == ["not_found", "not_found", "repeated_cycle", None]
    cycle = [p for p in store.pairs() if p.error_kind == "repeated_cycle"]
    assert len(cycle) == 1 and cycle[0].correction is not None
    assert cycle[0].correction["tool_calls"][0]["function"]["name"] == "search"


async def test_a_period_three_cycle_is_caught(git_repo, script, tmp_path):
    other = call("read_file", {"path": "lib/missing.py"})
    model = script(*[turn((READ, LIST, other)[i % 3]) for i in range(12)])
    finished, calls, _ = await _record(git_repo, model, tmp_path)
    assert finished.reason == "stuck"
    assert [c.error_kind for c in calls] == ["not_found"] * 3 + ["repeated_cycle"] * 3
    assert "3 calls ago" in calls[3].result


async def test_an_edit_or_a_success_in_between_is_not_a_cycle(git_repo, script, tmp_path):
    edit = call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Hey"})
    ok_read = call("read_file", {"path": "app.py"})
    model = script(turn(READ), turn(LIST), turn(edit), turn(READ), turn(ok_read), turn(LIST), turn(READ))
    finished, calls, _ = await _record(git_repo, model, tmp_path)
    assert finished.reason == "answered"
    assert [c.error_kind for c in calls] == [
        "not_found",
        "not_found",
        None,
        "not_found",
        None,
        "not_found",
        "not_found",
    ]


def _written_out(feedback: str, tools: list[str]) -> dict:
    """The one call a guard's answer writes out, read as the text and grammar tool modes read a reply."""
    from agent.protocol.textcalls import parse_reply

    parsed = parse_reply(feedback[feedback.index("{") : feedback.rindex("}") + 1], tools)
    assert parsed.error is None and len(parsed.tool_calls) == 1, feedback
    return {"function": parsed.tool_calls[0]["function"]}


async def test_each_guard_writes_out_a_way_out_that_runs_as_written_and_corrects_its_pair(git_repo, script, tmp_path):
    from agent.loop_guard import cycle_feedback, repeat_feedback

    tools = ["read_file", "list_files", "search", "finish"]
    way_out = _written_out(repeat_feedback("read_file"), tools)
    ok = call("read_file", {"path": "app.py"})
    finished, calls, store = await _record(git_repo, script(turn(ok), turn(ok), turn(way_out)), tmp_path)
    assert [c.error_kind for c in calls] == [None, "repeated_call", None]
    assert calls[1].result == repeat_feedback("read_file") and finished.reason == "finished"
    [pair] = store.pairs()
    assert pair.correction["tool_calls"][0]["function"]["name"] == "finish"

    way_out = _written_out(cycle_feedback("read_file", 2), tools)
    finished, calls, store = await _record(
        git_repo, script(turn(READ), turn(LIST), turn(READ), turn(way_out)), tmp_path / "cycle"
    )
    assert [c.error_kind for c in calls] == ["not_found", "not_found", "repeated_cycle", None]
    assert calls[3].name == "list_files" and "app.py" in calls[3].result
    cycle = [p for p in store.pairs() if p.error_kind == "repeated_cycle"]
    assert cycle[0].correction["tool_calls"][0]["function"]["name"] == "list_files"
