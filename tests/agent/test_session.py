"""The loop end to end over a real git repository, through the scripted litellm provider."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent.config import Settings
from agent.llm import load_litellm
from agent.protocol import (
    AssistantDelta,
    EditApplied,
    Interrupt,
    ModelUsage,
    ToolCallFinished,
    TurnFinished,
    UserInput,
    conversation_from_events,
    event_from_json,
)
from agent.runtime import open_session
from tests.conftest import call, turn


async def test_multi_file_change_lands(git_repo, script, run_agent):
    model = script(
        turn(
            call("edit_file", {"path": "app.py", "old_text": "'Hello, '", "new_text": "'Hi, '"}),
            call(
                "edit_file", {"path": "util.py", "old_text": "return a - b", "new_text": "return a - b  # difference"}
            ),
            content="Changing four files.",
        ),
        turn(
            call("create_file", {"path": "pkg/new.py", "content": "VALUE = 1\n"}),
            call("delete_file", {"path": "old.txt"}),
        ),
        turn(call("finish", {"summary": "done"})),
    )
    run = await run_agent(git_repo, model)
    assert run.finished.reason == "finished"
    assert run.finished.summary == "Finished: done"
    assert (git_repo / "app.py").read_text() == "def greet(name):\n    return 'Hi, ' + name\n"
    assert "return a - b  # difference" in (git_repo / "util.py").read_text()
    assert (git_repo / "pkg/new.py").read_text() == "VALUE = 1\n"
    assert not (git_repo / "old.txt").exists()
    assert [e.kind for e in run.of(EditApplied)] == ["modify", "modify", "create", "delete"]
    changes = {c.path: c.kind for c in run.session.last_turn_changes()}
    assert changes == {"app.py": "modify", "util.py": "modify", "pkg/new.py": "create", "old.txt": "delete"}
    assert "".join(e.text for e in run.of(AssistantDelta)) == "Changing four files."


async def test_wrong_old_text_gets_did_you_mean_then_fix_succeeds(git_repo, script, run_agent):
    model = script(
        turn(call("edit_file", {"path": "util.py", "old_text": "def add(a,b):\n    return a+b", "new_text": "x"})),
        turn(
            call(
                "edit_file",
                {
                    "path": "util.py",
                    "old_text": "def add(a, b):\n    return a + b",
                    "new_text": "def add(a, b):\n    return b + a",
                },
            )
        ),
    )
    run = await run_agent(git_repo, model)
    first, second = run.of(ToolCallFinished)
    assert not first.ok and first.error_kind == "no_match"
    assert "closest text in the file (lines 1-2" in first.result
    assert "1| def add(a, b):" in first.result and "2|     return a + b" in first.result
    assert "Nothing was changed" in first.result
    assert second.ok
    assert "return b + a" in (git_repo / "util.py").read_text()
    assert run.finished.reason == "answered"  # the script ran out: a final message, no calls


async def test_whitespace_only_difference_is_named(git_repo, script, run_agent):
    model = script(turn(call("edit_file", {"path": "util.py", "old_text": "return  a + b", "new_text": "x"})))
    run = await run_agent(git_repo, model)
    assert "Only whitespace differs" in run.of(ToolCallFinished)[0].result


async def test_ambiguous_match_counts_places(git_repo, script, run_agent):
    model = script(turn(call("edit_file", {"path": "util.py", "old_text": "(a, b):", "new_text": "(x, y):"})))
    run = await run_agent(git_repo, model)
    result = run.of(ToolCallFinished)[0]
    assert result.error_kind == "ambiguous"
    assert "matches 2 places in util.py (lines 1, 5)" in result.result
    assert "(a, b)" in (git_repo / "util.py").read_text()


async def test_schema_errors_are_results_and_the_session_continues(git_repo, script, run_agent):
    model = script(
        turn(call("read_file", '{"path": "app.py", ')),
        turn(call("open_file", {"path": "app.py"})),
        turn(call("read_file", {"path": "app.py", "start_line": "one"})),
        turn(call("read_file", {"path": "app.py"})),
    )
    run = await run_agent(git_repo, model)
    bad_json, unknown, wrong_type, good = run.of(ToolCallFinished)
    assert bad_json.error_kind == "malformed_json"
    assert "not valid JSON" in bad_json.result and "read_file(path: string" in bad_json.result
    assert unknown.error_kind == "unknown_tool"
    assert "no tool named 'open_file'" in unknown.result and "- edit_file(" in unknown.result
    assert wrong_type.error_kind == "bad_arguments"
    assert "'start_line' must be integer, got string \"one\"" in wrong_type.result
    assert good.ok and "1| def greet(name):" in good.result
    assert run.finished.reason == "answered"


async def test_syntax_error_after_edit_is_reported_where(git_repo, script, run_agent):
    model = script(
        turn(
            call(
                "edit_file",
                {"path": "app.py", "old_text": "return 'Hello, ' + name", "new_text": "return ('Hello, ' + name"},
            )
        )
    )
    run = await run_agent(git_repo, model)
    edit = run.of(EditApplied)[0]
    assert edit.syntax_error and edit.syntax_error.startswith("app.py:2:")
    assert "no longer parses" in run.of(ToolCallFinished)[0].result


async def test_max_steps_stops_the_loop(git_repo, script, run_agent):
    model = script(*[turn(call("read_file", {"path": "app.py"})) for _ in range(5)])
    run = await run_agent(git_repo, model, max_steps=2)
    assert run.finished.reason == "max_steps" and run.finished.steps == 2


async def test_max_cost_stops_the_loop(git_repo, script, run_agent):
    model = script(*[turn(call("read_file", {"path": "app.py"})) for _ in range(5)])
    load_litellm().register_model(
        {
            model: {
                "input_cost_per_token": 0.001,
                "output_cost_per_token": 0.001,
                "litellm_provider": "scripted",
                "mode": "chat",
            }
        }
    )
    run = await run_agent(git_repo, model, max_cost=0.01)
    usage = run.of(ModelUsage)
    assert run.finished.reason == "max_cost"
    assert run.finished.cost_usd >= 0.01
    assert sum(u.cost_usd for u in usage[:-1]) < 0.01  # it stopped at the first step over the limit


async def test_max_time_stops_a_slow_model(git_repo, script, run_agent):
    model = script({"content": "thinking", "tool_calls": [], "delay": 5})
    run = await run_agent(git_repo, model, max_time=0.3)
    assert run.finished.reason == "max_time"


async def test_interrupt_stops_at_the_next_step(git_repo, script):
    model = script(
        *[{"content": None, "tool_calls": [call("read_file", {"path": "app.py"})], "delay": 0.2} for _ in range(50)]
    )
    session = open_session(git_repo, Settings(model=model, approval="full-auto", max_steps=100))
    seen: list = []
    session.subscribe(seen.append)
    task = asyncio.create_task(session.run(UserInput(text="loop")))
    while not any(isinstance(e, ToolCallFinished) for e in seen):
        await asyncio.sleep(0.05)
    await session.submit(Interrupt())
    finished = await asyncio.wait_for(task, 5)
    assert finished.reason == "interrupted"
    assert finished.steps < 10


async def test_finish_ends_the_turn_and_a_second_turn_continues(git_repo, script):
    model = script(turn(call("finish", {"summary": "first"})), turn(call("finish", {"summary": "second"})))
    session = open_session(git_repo, Settings(model=model, approval="full-auto"))
    assert (await session.run(UserInput(text="one"))).summary == "Finished: first"
    assert (await session.run(UserInput(text="two"))).summary == "Finished: second"
    assert [m["role"] for m in session.messages].count("user") == 2


async def test_event_log_round_trips_and_rebuilds_the_conversation(git_repo, script, run_agent):
    model = script(
        turn(call("read_file", {"path": "app.py"}), content="Reading."),
        turn(call("nope", "{")),
        turn(call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Hey"})),
    )
    run = await run_agent(git_repo, model)
    lines = [e.to_json() for e in run.events]
    restored = [event_from_json(line) for line in lines]
    assert restored == run.events
    assert [e.to_json() for e in restored] == lines
    messages, tools = conversation_from_events(restored)
    assert messages == run.session.messages
    assert tools == run.session.toolbox.schemas()
    assert json.loads(lines[0])["type"] == "session_started"
    assert all(e.session_id == run.session.id for e in restored)
    by_id = {e.id: e for e in restored}
    assert all(
        e.cause_id in by_id
        for e in restored[1:]
        if e.cause_id and not isinstance(e, TurnFinished) and e.type != "turn_started"
    )


async def test_close_declines_a_pending_approval_and_stops_the_turn(git_repo, script):
    model = script(turn(call("run_command", {"command": "touch ran.txt"})), turn(call("finish", {"summary": "x"})))
    session = open_session(git_repo, Settings(model=model, approval="ask"))
    asked = asyncio.Event()
    session.subscribe(lambda e: asked.set() if e.type == "approval_requested" else None)
    task = asyncio.create_task(session.run(UserInput(text="run it")))
    await asyncio.wait_for(asked.wait(), 10)
    await session.close()
    finished = await asyncio.wait_for(task, 5)
    assert finished.reason == "interrupted"
    assert not (git_repo / "ran.txt").exists()
    assert session.messages[-1]["role"] == "tool" and "declined" in session.messages[-1]["content"]


async def test_interrupt_during_a_command_still_answers_every_call(git_repo, script):
    model = script(turn(call("run_command", {"command": "sleep 30"}), call("read_file", {"path": "app.py"})))
    session = open_session(git_repo, Settings(model=model, approval="full-auto"))
    started = asyncio.Event()
    session.subscribe(lambda e: started.set() if e.type == "tool_call_started" else None)
    task = asyncio.create_task(session.run(UserInput(text="run")))
    await asyncio.wait_for(started.wait(), 10)
    await asyncio.sleep(0.2)
    session.interrupt()
    finished = await asyncio.wait_for(task, 5)
    assert finished.reason == "interrupted"
    results = [m for m in session.messages if m["role"] == "tool"]
    assert len(results) == 2  # every tool call in the assistant message has its result
    assert "Stopped before this call completed" in results[0]["content"]
    assert "Interrupted by the user before this call ran" in results[1]["content"]


async def test_a_repeated_call_gets_feedback_instead_of_the_same_result(git_repo, script, run_agent):
    read = call("read_file", {"path": "app.py"})
    model = script(
        turn(read),
        turn(read),  # stuck: same call, nothing changed
        turn(call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Hey"})),
        turn(read),  # after an edit, reading again is legitimate
        turn(read),
    )
    run = await run_agent(git_repo, model)
    kinds = [e.error_kind for e in run.of(ToolCallFinished)]
    assert kinds == [None, "repeated_call", None, None, "repeated_call"]
    assert "Do not repeat it" in run.of(ToolCallFinished)[1].result


async def test_a_model_stuck_on_one_call_is_stopped(git_repo, script, run_agent):
    run = await run_agent(git_repo, script(*[turn(call("read_file", {"path": "app.py"})) for _ in range(10)]))
    assert run.finished.reason == "stuck"
    assert [e.error_kind for e in run.of(ToolCallFinished)] == [None] + ["repeated_call"] * 3


async def test_a_failed_write_is_a_tool_error_not_a_crash(git_repo, script, run_agent):
    # app.py is a file, so nothing can be created beneath it: the write fails with an OSError.
    model = script(
        turn(call("create_file", {"path": "app.py/new.py", "content": "y = 2\n"})),
        turn(call("finish", {"summary": "gave up"})),
    )
    run = await run_agent(git_repo, model)
    result = run.of(ToolCallFinished)[0]
    assert result.error_kind == "failed" and "Could not write app.py/new.py" in result.result
    assert (git_repo / "app.py").is_file()
    assert run.finished.reason == "finished"


async def test_a_second_turn_cannot_start_while_one_runs(git_repo, script):
    model = script({"content": "slow", "tool_calls": [], "delay": 0.5})
    session = open_session(git_repo, Settings(model=model, approval="full-auto"))
    first = asyncio.create_task(session.run(UserInput(text="one")))
    await asyncio.sleep(0.1)
    with pytest.raises(RuntimeError, match="already running"):
        await session.run(UserInput(text="two"))
    assert (await first).reason == "answered"
