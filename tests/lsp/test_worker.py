"""Turns run in a worker process: its crash is an answer, never a stalled or dead server, and what
it does still reaches the editor and the feedback store."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from agent.session_server import WORKER_NICE
from feedback_store import open_store
from tests.lsp.harness import command, event_types, lsp_session, scripted, wait_for

APP_BEFORE = "def greet(name):\n    return 'Hello, ' + name\n"
APP_AFTER = "def greet(name):\n    return f'Hello, {name}!'\n"


def options(tmp_path: Path, script: str) -> dict:
    return {"model": scripted(script), "approval": "auto-edit", "db": str(tmp_path / "feedback.db")}


def recorded(db: Path) -> list[dict]:
    store = open_store(db)
    try:
        (session,) = store.list_sessions()
        return store.events(session.id)
    finally:
        store.close()


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and " Z " not in Path(f"/proc/{pid}/stat").read_text()


def niceness(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


async def code_actions(client, uri: str) -> list:
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=1, character=0)),
        context=types.CodeActionContext(diagnostics=[]),
    )
    return await asyncio.wait_for(client.text_document_code_action_async(params), 10)


@pytest.mark.timeout(180)
async def test_a_worker_killed_mid_turn_is_an_error_answer_and_the_server_keeps_serving(
    git_repo: Path, tmp_path: Path
) -> None:
    async with lsp_session(git_repo, options(tmp_path, "edit_then_reads.json")) as (client, editor):
        app_uri = editor.open(git_repo / "app.py")
        asking = asyncio.ensure_future(command(client, "teachback.ask", "greet politely"))
        await wait_for(lambda: "edit_applied" in event_types(editor), what="the turn's edit", timeout=90)
        status = await command(client, "teachback.status", timeout=10)
        assert status["turnProcess"] == "worker" and status["running"] is True
        os.kill(status["agentPid"], signal.SIGKILL)

        stopped_by = r"the turn stopped: the agent's process stopped \(killed by SIGKILL\)"
        with pytest.raises(JsonRpcException, match=stopped_by) as stopped:
            await asyncio.wait_for(asking, 30)
        assert "in your open buffers, unsaved (app.py); teachback.undo takes them back" in str(stopped.value)
        # The edit made before the crash is in the open buffer; the file is back as the editor saw it.
        assert editor.text(app_uri) == APP_AFTER
        assert (git_repo / "app.py").read_text() == APP_BEFORE
        # The server answers as before, and the next request runs in a new worker.
        assert [a.title for a in await code_actions(client, app_uri)][0] == "teachback: explain this code"
        status = await command(client, "teachback.status", timeout=10)
        assert status["running"] is False and status["session"] is None
        assert await command(client, "teachback.undo", timeout=100) == {"restored": ["app.py"]}
        assert editor.text(app_uri) == APP_BEFORE == (git_repo / "app.py").read_text()
        second = (await command(client, "teachback.status", timeout=10))["agentPid"]
        assert second is not None and second != status["agentPid"]


@pytest.mark.timeout(180)
async def test_a_worker_that_dies_between_turns_is_reported_and_replaced(git_repo: Path, tmp_path: Path) -> None:
    async with lsp_session(git_repo, options(tmp_path, "answer_only.json")) as (client, _editor):
        first = await command(client, "teachback.ask", "what is this?", timeout=100)
        assert first["reason"] == "answered"
        pid = (await command(client, "teachback.status"))["agentPid"]
        os.kill(pid, signal.SIGKILL)
        await wait_for(
            lambda: any("agent's process stopped" in m.message for m in client.messages),
            what="a message about the stopped worker",
        )
        again = await command(client, "teachback.ask", "and now?", timeout=100)
        assert again["reason"] == "answered"
        assert (await command(client, "teachback.status"))["agentPid"] not in (None, pid)


@pytest.mark.timeout(180)
async def test_the_worker_records_the_whole_session_at_lower_priority(git_repo: Path, tmp_path: Path) -> None:
    async with lsp_session(git_repo, options(tmp_path, "multi_file.json")) as (client, editor):
        editor.open(git_repo / "app.py")
        result = await command(client, "teachback.ask", "tidy up", timeout=100)
        assert result["reason"] == "finished" and result["applied"] is True
        assert len(editor.applied) == 1  # the turn's edits reached the editor as one applyEdit
        pid = (await command(client, "teachback.status"))["agentPid"]
        if sys.platform == "linux":
            assert niceness(pid) - niceness(client._server.pid) == WORKER_NICE  # type: ignore[union-attr]
        shown = [e for e in editor.events if e["type"] != "assistant_delta"]
    assert not running(pid)  # shutdown ends the worker
    events = recorded(tmp_path / "feedback.db")
    assert [e["id"] for e in events] == [e["id"] for e in shown]
    assert event_types(editor).count("edit_applied") == 3
    assert events[-1]["type"] == "turn_finished" and events[-1]["reason"] == "finished"


@pytest.mark.timeout(180)
async def test_shutdown_during_a_turn_stops_it_and_records_its_end(git_repo: Path, tmp_path: Path) -> None:
    async with lsp_session(git_repo, options(tmp_path, "slow_reads.json")) as (client, editor):
        asking = asyncio.ensure_future(command(client, "teachback.ask", "read everything"))
        await wait_for(lambda: event_types(editor).count("tool_call_started") >= 2, what="two tool calls", timeout=90)
        pid = (await command(client, "teachback.status", timeout=10))["agentPid"]
    asking.cancel()
    assert not running(pid)
    events = recorded(tmp_path / "feedback.db")
    assert events[-1]["type"] == "turn_finished" and events[-1]["reason"] == "interrupted"


@pytest.mark.timeout(180)
async def test_inline_turns_still_work(git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEACHBACK_TURN_PROCESS", "inline")
    async with lsp_session(git_repo, options(tmp_path, "multi_file.json")) as (client, editor):
        app_uri = editor.open(git_repo / "app.py")
        result = await command(client, "teachback.ask", {"instruction": "tidy up", "uri": app_uri}, timeout=100)
        assert result["reason"] == "finished" and result["applied"] is True
        assert editor.text(app_uri) == APP_AFTER
        status = await command(client, "teachback.status")
        assert status["turnProcess"] == "inline" and status["agentPid"] is None
