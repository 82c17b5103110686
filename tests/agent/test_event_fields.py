"""What subscribers need is on the events: the call's target when it starts, the command's exit status
when it ends; events recorded before these fields existed still load and still make the same pairs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from textual.app import App, ComposeResult

from agent.protocol import AssistantMessage, ToolCallFinished, ToolCallStarted, event_from_dict, event_from_json
from feedback_store import Recorder, open_store
from lsp_server.describe import log_line, progress_message
from tests.conftest import call, turn
from tests.store.events import FakeSession, edit, mixed_session
from tui.widgets.tool_log import ToolLog


async def test_the_session_puts_target_and_exit_code_on_the_events(git_repo, script, run_agent):
    model = script(
        turn(call("read_file", {"path": "app.py"})),
        turn(call("read_file", '{"path": ')),
        turn(call("move_file", {"src": "old.txt", "dst": "new.txt"})),
        turn(call("run_command", {"command": "exit 3"})),
        turn(call("run_command", {"command": "true"})),
    )
    run = await run_agent(git_repo, model)
    assert [e.target for e in run.of(ToolCallStarted)] == ["app.py", None, "old.txt", "exit 3", "true"]
    assert [e.exit_code for e in run.of(ToolCallFinished)] == [None, None, None, 3, 0]
    for event in run.events:
        assert event_from_json(event.to_json()) == event
    first, unreadable, move = run.of(ToolCallStarted)[:3]
    assert first.shown == {"action": "read", "kind": "read", "title": "Read app.py", "line": None}
    assert unreadable.shown is not None and unreadable.shown["kind"] == "read"  # its arguments could not be read
    assert move.shown == {"action": "edit", "kind": "move", "title": "Move old.txt to new.txt", "line": None}
    assert [e.roles for e in run.of(ToolCallFinished)] == [e.roles for e in run.of(ToolCallStarted)]


def test_events_recorded_without_the_fields_still_load() -> None:
    started = event_from_dict(
        {
            "type": "tool_call_started",
            "session_id": "s",
            "id": "e1",
            "ts": 1.0,
            "call_id": "c",
            "name": "read_file",
            "arguments": '{"path": "a.py"}',
            "step": 1,
        }
    )
    finished = event_from_dict(
        {
            "type": "tool_call_finished",
            "session_id": "s",
            "id": "e2",
            "ts": 2.0,
            "call_id": "c",
            "name": "run_command",
            "ok": False,
            "result": "$ x\n[exit code 2]\n",
            "step": 1,
            "error_kind": "exit_status",
            "target": "x",
        }
    )
    assert started.target is None and finished.exit_code is None


def _not_runnable_session(exit_code: int | None, text: str) -> FakeSession:
    s = FakeSession().start().user("test it")
    s.call("edit_file", {"path": "a.py"}, target="a.py", edits=[edit("a.py", "x = 1\n", "x = 2\n")])
    s.call("run_command", {"command": "nosuch"}, ok=False, error_kind="exit_status", target="nosuch", result=text)
    s.events[-1] = dataclasses.replace(s.events[-1], exit_code=exit_code)
    return s.finish()


def _pairs(tmp_path: Path, session: FakeSession) -> list[tuple[str | None, str | None]]:
    store = open_store(tmp_path / "fields.db")
    Recorder(store).record_many(session.events)
    return [(p.source, p.error_kind) for p in store.pairs()]


def test_the_pair_builder_reads_the_exit_code_from_the_event(tmp_path: Path) -> None:
    # The text says nothing of the exit status: only the event's field tells "not runnable" from a failing test.
    assert _pairs(tmp_path, _not_runnable_session(127, "sh: nosuch: not found")) == [("tool", "exit_status")]


def test_a_failing_test_command_is_still_a_test_pair(tmp_path: Path) -> None:
    failing = _not_runnable_session(1, "$ nosuch\n[exit code 1]\nFAILED")
    assert _pairs(tmp_path, failing) == [("test", "exit_status")]


def test_the_language_server_describes_calls_from_the_fields() -> None:
    started = ToolCallStarted(
        session_id="s", call_id="c", name="run_command", arguments="{}", step=4, target="pytest -q"
    )
    assert progress_message(started) == "step 4: run_command pytest -q"
    finished = ToolCallFinished(
        session_id="s",
        call_id="c",
        name="run_command",
        ok=False,
        result="$ pytest -q\nboom",
        step=4,
        error_kind="exit_status",
        target="pytest -q",
        exit_code=2,
    )
    line, _ = log_line(finished)
    assert line == "[tool] run_command pytest -q failed (exit code 2): $ pytest -q"


class _Log(App[None]):
    def compose(self) -> ComposeResult:
        yield ToolLog(id="tools")


async def test_the_tool_log_titles_come_from_the_fields() -> None:
    app = _Log()
    async with app.run_test() as pilot:
        log = app.query_one(ToolLog)
        await log.started(
            ToolCallStarted(
                session_id="s", call_id="c1", name="search", arguments='{"pattern": "greet"}', step=1, target="greet"
            )
        )
        await log.started(
            ToolCallStarted(
                session_id="s",
                call_id="c2",
                name="run_command",
                arguments='{"command": "pytest"}',
                step=2,
                target="pytest",
            )
        )
        await log.finished(
            ToolCallFinished(
                session_id="s",
                call_id="c2",
                name="run_command",
                ok=False,
                result="x",
                step=2,
                error_kind="exit_status",
                target="pytest",
                exit_code=1,
            )
        )
        await pilot.pause()
        running, failed = log.entries
        assert running.title == "… search greet"
        assert failed.title == "✗ run_command pytest — exit code 1"


def test_an_event_as_a_dict_is_its_type_then_every_field_in_order() -> None:
    for event in [
        *mixed_session().events,
        ToolCallStarted(session_id="s", call_id="c", name="x", arguments="[", step=1),
    ]:
        fields = [f.name for f in dataclasses.fields(event)]
        if isinstance(event, AssistantMessage) and event.text is None:
            # added later: left out when unset, so a native reply's stored row is what older readers parse
            fields.remove("text")
        # added later too: how a call reads to a person, and its roles at its end
        if isinstance(event, ToolCallStarted) and event.shown is None:
            fields.remove("shown")
        if isinstance(event, ToolCallFinished) and event.roles is None:
            fields.remove("roles")
        assert list(event.to_dict()) == ["type", *fields]
        assert event.to_dict() == {"type": event.type, **{name: getattr(event, name) for name in fields}}


async def test_a_reply_with_its_calls_in_its_text_carries_its_words_apart(git_repo, script, run_agent):
    written = '{"name": "read_file", "arguments": {"path": "app.py"}}'
    model = script(turn(content=f"Looking first.\n<tool_call>\n{written}\n</tool_call>"), turn(content="Done."))
    text_mode = await run_agent(git_repo, model, tool_mode="text")
    said = text_mode.of(AssistantMessage)
    assert [e.text for e in said] == ["Looking first.", "Done."]
    assert written in said[0].message["content"]  # the conversation keeps the raw reply, as sent
    native = await run_agent(git_repo, script(turn(call("read_file", {"path": "app.py"}), content="Looking.")))
    assert [e.text for e in native.of(AssistantMessage)] == [None, None]  # the content is the words
