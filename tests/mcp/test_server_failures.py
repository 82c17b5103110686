"""Servers that cannot be used: a command that does not exist, a server that never finishes its
handshake, an entry that cannot be read. The session starts anyway (within the start-up timeout),
says which server is missing and how to fix it, and a call of its tools is a tool error; `teachback
doctor` lists each server, whether it starts, and its tools. And a streamable-HTTP server, with the
headers its entry names."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from agent.protocol import ErrorEvent, SessionStarted, ToolCallFinished
from cli.entry import main
from feedback_store import Recorder, open_store
from tests.conftest import call, turn
from tests.mcp.conftest import PROBE, finished, run_session, server_table

BROKEN = server_table("broken", "/nonexistent/mcp-server", [])
HANGS = server_table("hangs", sys.executable, ["-c", "import time; time.sleep(60)"], startup_timeout=1.5)


@pytest.mark.timeout(60)
async def test_servers_that_do_not_start_leave_the_session_running(tmp_path, user_servers, script):
    user_servers(BROKEN + HANGS, time=False)
    model = script(
        turn(call("mcp__broken__anything", {})),
        turn(call("mcp__hangs__wait", {})),
        turn(call("mcp__probe__divide", {"a": 1, "b": 4})),
        turn(content="done"),
    )
    clock = time.monotonic()
    db = tmp_path / "f.db"
    store = open_store(db)
    session, events = None, []
    try:
        from agent.config import Settings
        from agent.protocol import UserInput
        from agent.runtime import open_session

        session = open_session(tmp_path, Settings(model=model, approval="full-auto", repo_map_tokens=0))
        session.subscribe(Recorder(store))
        session.subscribe(events.append)
        await session.run(UserInput(text="go"))
    finally:
        if session is not None:
            await session.close()
    assert time.monotonic() - clock < 20  # the hanging server cost its 1.5 s start-up timeout, not 60 s
    notices = [e.message for e in events if isinstance(e, ErrorEvent) and e.kind == "mcp"]
    assert len(notices) == 2
    assert "MCP server broken is not available" in notices[0] and "command was not found" in notices[0]
    assert "MCP server hangs is not available" in notices[1] and "within 1.5 s" in notices[1]
    assert all("teachback doctor" in n for n in notices)
    started = next(e for e in events if isinstance(e, SessionStarted))
    assert {t["function"]["name"] for t in started.tools if t["function"]["name"].startswith("mcp__")} == {
        "mcp__probe__divide",
        "mcp__probe__slow",
        "mcp__probe__crash",
        "mcp__probe__picture",
        "mcp__probe__header",
    }
    assert finished(events) == [
        ("mcp__broken__anything", "unavailable"),
        ("mcp__hangs__wait", "unavailable"),
        ("mcp__probe__divide", None),
    ]
    first = next(e for e in events if isinstance(e, ToolCallFinished))
    assert "The MCP server broken is not available" in first.result
    # A server that could not start is not the model's mistake: no pair is made of it.
    assert [p.error_kind for p in store.pairs(session_id=session.id)] == []
    store.close()


async def test_an_entry_that_cannot_be_used_is_reported_and_the_rest_start(tmp_path, user_servers, script):
    user_servers('[mcp_servers.typo]\ncomand = "x"\n', time=False)
    _, events = await run_session(tmp_path, script(turn(call("mcp__probe__divide", {"a": 2, "b": 1}))))
    [notice] = [e.message for e in events if isinstance(e, ErrorEvent)]
    assert "MCP server typo is not available" in notice and "unknown key(s) comand" in notice
    assert finished(events) == [("mcp__probe__divide", None)]


@pytest.mark.timeout(60)
async def test_a_server_that_keeps_crashing_is_left_down_after_three_restarts(tmp_path, user_servers, script):
    user_servers(time=False)
    crashes = [turn(call("mcp__probe__crash", {"when": f"now {n}"})) for n in range(4)]
    model = script(*crashes, turn(call("mcp__probe__crash", {"when": "later"})), turn(content="done"))
    _, events = await run_session(tmp_path, model)
    assert finished(events) == [("mcp__probe__crash", "crashed")] * 4 + [("mcp__probe__crash", "unavailable")]
    last = [e for e in events if isinstance(e, ToolCallFinished)][-1]
    assert "it crashed 4 times in this session" in last.result


@pytest.mark.timeout(60)
def test_doctor_lists_each_server_whether_it_starts_and_its_tools(tmp_path, user_servers, script, capsys):
    user_servers(BROKEN)
    code = main(["doctor", "--workspace", str(tmp_path), "--model", script(turn(content="hi"))])
    out = capsys.readouterr().out
    assert code == 1  # a server that does not start is a failed check
    probe = next(line for line in out.splitlines() if "mcp server probe" in line)
    assert probe.startswith("ok ") and "5 tool(s): mcp__probe__divide, mcp__probe__slow" in probe
    timed = next(line for line in out.splitlines() if "mcp server time" in line)
    assert "mcp__time__get_current_time, mcp__time__convert_time" in timed
    broken = next(line for line in out.splitlines() if "mcp server broken" in line)
    assert broken.startswith("FAIL") and "command was not found" in broken and "teachback.toml" in broken


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.timeout(60)
async def test_a_streamable_http_server_with_its_headers(tmp_path, teachback_home, script):
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, str(PROBE), "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the probe server did not listen within 20 s"
                time.sleep(0.1)
        (teachback_home / "teachback.toml").write_text(
            f'[mcp_servers.web]\nurl = "http://127.0.0.1:{port}/mcp"\nheaders = {{ X-Team = "${{TEAM:-blue}}" }}\n'
        )
        model = script(
            turn(call("mcp__web__header", {"name": "X-Team"})), turn(call("mcp__web__divide", {"a": 1, "b": 0}))
        )
        _, events = await run_session(tmp_path, model)
    finally:
        server.kill()
        server.wait()
    results = [(e.name, e.error_kind, e.result) for e in events if isinstance(e, ToolCallFinished)]
    assert results[0] == ("mcp__web__header", None, "blue")
    assert results[1][1] == "failed" and "b must not be zero" in results[1][2]
