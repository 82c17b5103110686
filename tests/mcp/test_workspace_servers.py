"""A workspace's own MCP servers (.mcp.json, the [mcp_servers] of its teachback.toml) start nothing
until the user allows them, say what was found and how to allow it, and stop starting when their
definitions change."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from agent.protocol import ErrorEvent, SessionStarted, ToolCallFinished
from cli.entry import main
from tests.conftest import call, turn
from tests.mcp.conftest import PROBE, finished, run_session, server_table

DIVIDE = call("mcp__probe__divide", {"a": 8, "b": 2})


def claude_file(workspace: Path, marker: Path, args: list[str] | None = None) -> None:
    """A .mcp.json as Claude Code reads it: the probe server, which writes `marker` when it starts."""
    server = {"command": sys.executable, "args": args or [str(PROBE)], "env": {"PROBE_MARKER": str(marker)}}
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"probe": server}}, indent=2))


async def test_a_workspaces_mcp_json_starts_nothing_until_allowed(tmp_path, script, capsys):
    workspace, marker = tmp_path / "cloned", tmp_path / "started"
    workspace.mkdir()
    claude_file(workspace, marker)
    model = script(turn(DIVIDE), turn(content="done"))

    _, events = await run_session(workspace, model)
    assert not marker.exists()  # the server's program never ran
    started = next(e for e in events if isinstance(e, SessionStarted))
    assert not any(t["function"]["name"].startswith("mcp__") for t in started.tools)
    notice = next(e for e in events if isinstance(e, ErrorEvent) and e.kind == "mcp")
    assert ".mcp.json" in notice.message and "(probe)" in notice.message
    assert f"teachback mcp allow --workspace {workspace.resolve()}" in notice.message
    assert finished(events) == [("mcp__probe__divide", "unknown_tool")]

    assert main(["mcp", "allow", "--workspace", str(workspace)]) == 0
    assert f"probe: {sys.executable} {PROBE}" in capsys.readouterr().out

    _, events = await run_session(workspace, model)
    assert marker.exists()
    assert not [e for e in events if isinstance(e, ErrorEvent)]
    result = next(e for e in events if isinstance(e, ToolCallFinished))
    assert (result.name, result.ok, result.result) == ("mcp__probe__divide", True, "8 / 2 = 4")


async def test_changed_definitions_stop_starting_until_allowed_again(tmp_path, script):
    workspace, marker = tmp_path / "cloned", tmp_path / "started"
    workspace.mkdir()
    claude_file(workspace, marker)
    assert main(["mcp", "allow", "--workspace", str(workspace)]) == 0
    claude_file(workspace, marker, args=[str(PROBE), "--changed-by-a-pull"])  # what a `git pull` could do

    _, events = await run_session(workspace, script(turn(DIVIDE)))
    assert not marker.exists()
    notice = next(e for e in events if isinstance(e, ErrorEvent) and e.kind == "mcp")
    assert "they changed since you allowed them" in notice.message

    assert main(["mcp", "revoke", "--workspace", str(workspace)]) == 0
    _, events = await run_session(workspace, script(turn(DIVIDE), name="again.json"))
    notice = next(e for e in events if isinstance(e, ErrorEvent) and e.kind == "mcp")
    assert "a cloned repository must not start programs on its own" in notice.message
    assert not marker.exists()


async def test_a_workspace_teachback_toml_server_is_held_back_the_same_way(tmp_path, script, capsys):
    workspace, marker = tmp_path / "cloned", tmp_path / "started"
    workspace.mkdir()
    table = server_table("probe", sys.executable, [str(PROBE)], env={"PROBE_MARKER": str(marker)})
    (workspace / "teachback.toml").write_text("max_steps = 5\n\n" + table)

    _, events = await run_session(workspace, script(turn(DIVIDE)))
    assert not marker.exists()
    notice = next(e for e in events if isinstance(e, ErrorEvent) and e.kind == "mcp")
    assert "teachback.toml" in notice.message and "(probe)" in notice.message

    assert main(["mcp", "list", "--workspace", str(workspace)]) == 0
    listed = capsys.readouterr().out
    assert "not started: probe:" in listed and str(PROBE) in listed

    assert main(["mcp", "allow", "--workspace", str(workspace)]) == 0
    _, events = await run_session(workspace, script(turn(DIVIDE), name="allowed.json"))
    assert marker.exists()
    assert finished(events) == [("mcp__probe__divide", None)]


def test_allowing_a_folder_without_servers_says_so(tmp_path, capsys):
    assert main(["mcp", "allow", "--workspace", str(tmp_path)]) == 1
    assert "defines no MCP servers" in capsys.readouterr().err
