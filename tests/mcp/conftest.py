"""MCP servers for the tests: the probe server written here with the official library, and the
published time server (mcp-server-time, in the dev extra), configured in the user's teachback.toml."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).with_name("probe_server.py")
TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"


def toml_value(value: object) -> str:
    """A string, number, list or table of strings as TOML (a JSON string is a TOML basic string)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def server_table(name: str, command: str, args: list[str], **more: object) -> str:
    lines = [f"[mcp_servers.{name}]", f"command = {toml_value(command)}", f"args = {toml_value(args)}"]
    lines += [f"{key} = {toml_value(value)}" for key, value in more.items()]
    return "\n".join(lines) + "\n"


@pytest.fixture
def time_server() -> Path:
    assert TIME_SERVER.exists(), "mcp-server-time is not installed: pip install -e '.[dev]' (or make test)"
    return TIME_SERVER


@pytest.fixture
def user_servers(teachback_home: Path, time_server: Path):
    """Write the user's teachback.toml with the probe server (2 s per call) and the time server,
    plus any `extra` TOML; returns the file."""

    def write(extra: str = "", *, time: bool = True) -> Path:
        text = server_table("probe", sys.executable, [str(PROBE)], call_timeout=2)
        if time:
            text += server_table("time", str(time_server), ["--local-timezone", "UTC"])
        path = teachback_home / "teachback.toml"
        path.write_text(text + extra)
        return path

    return write


async def run_session(workspace: Path, model: str, *, answer=None, **settings):
    """One session on `workspace` with the scripted `model`, its MCP servers closed at the end;
    `answer(request)` -> (approved, comment) answers approval requests. Returns (session, events)."""
    import asyncio

    from agent.config import Settings
    from agent.protocol import ApprovalDecision, ApprovalRequested, UserInput
    from agent.runtime import open_session

    settings.setdefault("approval", "full-auto")
    session = open_session(workspace, Settings(model=model, repo_map_tokens=0, **settings))
    events: list = []
    session.subscribe(events.append)
    pending: set = set()

    def respond(event) -> None:
        if isinstance(event, ApprovalRequested) and answer is not None:
            approved, comment = answer(event)
            decision = ApprovalDecision(request_id=event.request_id, approved=approved, comment=comment)
            task = asyncio.get_running_loop().create_task(session.submit(decision))
            pending.add(task)

    session.subscribe(respond)
    try:
        await session.run(UserInput(text="use the tools"))
    finally:
        await session.close()
    return session, events


def finished(events: list) -> list[tuple[str, str | None]]:
    from agent.protocol import ToolCallFinished

    return [(e.name, e.error_kind) for e in events if isinstance(e, ToolCallFinished)]
