"""A fixed event log (ids, times and paths fixed) recorded into a store: two sessions, three pairs."""

from __future__ import annotations

import json
from pathlib import Path

from agent.protocol import (
    AssistantMessage,
    EditApplied,
    Event,
    SessionStarted,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)
from feedback_store import Recorder, open_store

T0 = 1_767_268_800.0  # 2026-01-01 12:00 UTC
TOOLS = [{"type": "function", "function": {"name": "edit_file", "parameters": {"type": "object"}}}]
APP_BEFORE = "def greet(name):\n    return 'Hello, ' + name\n"
APP_AFTER = "def greet(name):\n    return f'Hello, {name}!'\n"


def _call(call_id: str, name: str, arguments: dict | str) -> dict:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}],
    }


def _tool_call(
    sid: str,
    n: int,
    step: int,
    call_id: str,
    name: str,
    arguments: dict | str,
    *,
    ok: bool,
    result: str,
    error_kind: str | None = None,
    target: str | None = None,
) -> list[Event]:
    ts = T0 + n * 60
    message = _call(call_id, name, arguments)
    return [
        AssistantMessage(session_id=sid, id=f"{sid}-e{n:02d}a", ts=ts, step=step, message=message),
        ToolCallStarted(
            session_id=sid,
            id=f"{sid}-e{n:02d}b",
            ts=ts,
            call_id=call_id,
            name=name,
            arguments=message["tool_calls"][0]["function"]["arguments"],
            step=step,
        ),
        ToolCallFinished(
            session_id=sid,
            id=f"{sid}-e{n:02d}c",
            ts=ts + 1,
            call_id=call_id,
            name=name,
            ok=ok,
            result=result,
            step=step,
            error_kind=error_kind,
            target=target,
            message={"role": "tool", "tool_call_id": call_id, "content": result},
        ),
    ]


def session_one() -> list[Event]:
    sid = "s1"
    events: list[Event] = [
        SessionStarted(
            session_id=sid,
            id="s1-e00",
            ts=T0,
            workspace="/work/proj",
            model="openai/gpt-4o-mini",
            frontend="tui",
            system_prompt="You are a coding agent.",
            tools=TOOLS,
        ),
        TurnStarted(
            session_id=sid,
            id="s1-e01",
            ts=T0,
            turn=1,
            text="fix the greeting",
            message={"role": "user", "content": "fix the greeting"},
        ),
    ]
    events += _tool_call(
        sid,
        2,
        1,
        "c1",
        "edit_fle",
        {"path": "app.py"},
        ok=False,
        error_kind="unknown_tool",
        result="Unknown tool 'edit_fle'. Did you mean edit_file? Available: edit_file, read_file.",
    )
    events += _tool_call(
        sid,
        3,
        2,
        "c2",
        "edit_file",
        {"path": "app.py", "old_text": "return 'Hi, ' + name", "new_text": "x"},
        ok=False,
        error_kind="no_match",
        target="app.py",
        result="old_text not found in app.py. Closest lines (2):\n    return 'Hello, ' + name",
    )
    fix = _tool_call(
        sid,
        4,
        3,
        "c3",
        "edit_file",
        {"path": "app.py", "old_text": "return 'Hello, ' + name", "new_text": "return f'Hello, {name}!'"},
        ok=True,
        target="app.py",
        result="Edited app.py: replaced 1 occurrence at line 2.",
    )
    edit = EditApplied(
        session_id=sid,
        id="s1-e04e",
        ts=T0 + 240,
        edit_id="edit-1",
        call_id="c3",
        path="app.py",
        kind="modify",
        before=APP_BEFORE,
        after=APP_AFTER,
        diff="--- a/app.py\n+++ b/app.py\n@@ -1,2 +1,2 @@\n def greet(name):\n"
        "-    return 'Hello, ' + name\n+    return f'Hello, {name}!'\n",
    )
    events += [*fix[:2], edit, fix[2]]
    events.append(TurnFinished(session_id=sid, id="s1-e05", ts=T0 + 300, turn=1, reason="finished", steps=3))
    return events


def session_two() -> list[Event]:
    sid = "s2"
    events: list[Event] = [
        SessionStarted(
            session_id=sid,
            id="s2-e00",
            ts=T0 + 3600,
            workspace="/work/proj",
            model="anthropic/claude-sonnet-4-5",
            frontend="cli",
            system_prompt="You are a coding agent.",
            tools=TOOLS,
        ),
        TurnStarted(
            session_id=sid,
            id="s2-e01",
            ts=T0 + 3600,
            turn=1,
            text="read the config",
            message={"role": "user", "content": "read the config"},
        ),
    ]
    events += _tool_call(
        sid,
        62,
        1,
        "d1",
        "read_file",
        {"path": "config.toml"},
        ok=False,
        error_kind="not_found",
        target="config.toml",
        result="config.toml does not exist. Files here: app.py, util.py.",
    )
    events.append(TurnFinished(session_id=sid, id="s2-e63", ts=T0 + 3800, turn=1, reason="answered", steps=1))
    return events


def record_fixture(db: Path) -> Path:
    with open_store(db) as store:
        recorder = Recorder(store)
        for event in (*session_one(), *session_two()):
            recorder(event)
    return db
