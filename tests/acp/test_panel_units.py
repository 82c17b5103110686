"""The agent panel's pure parts: the worker's reading of a terminal's report (it crosses a process),
slash commands in a prompt, the history's cursor, and a terminal kept in its tool call."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError

from acp_server.commands import available_commands, command_in
from acp_server.history import _offset
from acp_server.updates import Translator
from acp_server.worker_terminal import terminal_run
from agent.protocol import ToolCallFinished, ToolCallStarted
from agent.terminal import TerminalFailed


def test_a_terminals_report_is_read_with_its_exit_code_or_refused_with_the_reason() -> None:
    run = terminal_run({"output": "ok\n", "exit_code": 0, "signal": None, "timed_out": False, "truncated": True})
    assert (run.output, run.exit_code, run.truncated, run.timed_out) == ("ok\n", 0, True, False)
    for answer, reason in [
        (None, "NoneType, not an object"),
        ([1], "list, not an object"),
        ({"exit_code": 0}, "no output text"),
        ({"output": "x", "exit_code": True}, "no whole number"),
        ({"output": "x", "exit_code": "3"}, "no whole number"),
    ]:
        with pytest.raises(TerminalFailed, match=reason):
            terminal_run(answer)


def test_only_a_known_command_alone_is_a_command() -> None:
    assert command_in("/undo") == "undo" and command_in("  /undo \n") == "undo"
    assert command_in("/undo the last two") is None and command_in("please /undo") is None
    assert command_in("/redo") is None and command_in("undo") is None
    [offered] = available_commands().model_dump(by_alias=True)["availableCommands"]
    assert offered["name"] == "undo" and offered["description"]


def test_the_history_cursor_is_only_one_it_gave() -> None:
    assert _offset(None) == 0 and _offset("50") == 50
    for cursor in ("-1", "abc", "1" * 20):
        with pytest.raises(RequestError):
            _offset(cursor)


def test_a_terminal_stays_in_its_tool_call_beside_the_result(tmp_path: Path) -> None:
    translator = Translator(tmp_path)
    translator.updates(ToolCallStarted(session_id="s", call_id="c1", name="run_command", arguments="{}", step=1))
    attached = translator.attach_terminal("c1", "term-7").model_dump(by_alias=True, exclude_none=True)
    assert attached["content"] == [{"type": "terminal", "terminalId": "term-7"}]
    finished = ToolCallFinished(
        session_id="s", call_id="c1", name="run_command", ok=True, result="$ true\n[exit code 0]\n", step=1
    )
    [done] = [u.model_dump(by_alias=True, exclude_none=True) for u in translator.updates(finished)]
    assert done["content"][0] == {"type": "terminal", "terminalId": "term-7"}
    assert "[exit code 0]" in done["content"][1]["content"]["text"]
