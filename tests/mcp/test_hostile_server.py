"""An MCP server that breaks the protocol (hostile_server.py): lines on stdout that are not JSON-RPC
are ignored with one line in the log, never a traceback, and the real answer after them still
arrives; a response whose `result` is not an object fails its call at once with what is wrong,
instead of waiting out the call's timeout."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from agent.protocol import ToolCallFinished
from tests.conftest import call, turn
from tests.mcp.conftest import run_session, server_table

HOSTILE = Path(__file__).with_name("hostile_server.py")


@pytest.mark.timeout(60)
async def test_lines_that_are_not_json_rpc_and_results_that_are_not_objects(
    tmp_path, teachback_home, script, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture
) -> None:
    (teachback_home / "teachback.toml").write_text(
        server_table("hostile", sys.executable, [str(HOSTILE)], call_timeout=20)
    )
    model = script(
        turn(call("mcp__hostile__noise", {})),
        turn(call("mcp__hostile__scalar", {})),
        turn(call("mcp__hostile__array", {})),
        turn(call("mcp__hostile__text", {})),
        turn(call("mcp__hostile__noise", {"again": True})),
        turn(content="done"),
    )
    caplog.set_level(logging.DEBUG, logger="agent.mcp")
    _, events = await run_session(tmp_path, model)

    calls = [e for e in events if isinstance(e, ToolCallFinished)]
    assert max(e.duration_ms for e in calls) < 5000  # answered at once, not after the 20 s call timeout
    results = [(e.name, e.error_kind, e.result) for e in calls]
    assert results[0] == ("mcp__hostile__noise", None, "after the noise")
    assert results[4] == ("mcp__hostile__noise", None, "after the noise")
    for (name, kind, text), what in zip(results[1:4], ("an integer", "an array", "a string"), strict=True):
        assert kind == "failed", (name, text)
        assert f"its result is {what}, not an object" in text, text
    ignored = [r for r in caplog.records if "it was ignored" in r.getMessage()]
    assert len(ignored) == 8  # four noise lines per noise call
    assert [r.levelno for r in ignored].count(logging.WARNING) == 1  # said once, the rest at debug
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
    assert "Traceback" not in capfd.readouterr().err
