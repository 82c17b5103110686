"""$/cancelRequest and a cancelled progress both stop a long turn at its next step."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.lsp.harness import command, event_types, lsp_session, scripted, wait_for

SCRIPT_STEPS = 20


def started_calls(editor) -> int:
    return event_types(editor).count("tool_call_started")


def finished_turn(editor) -> dict:
    return next(e for e in editor.events if e["type"] == "turn_finished")


@pytest.mark.timeout(90)
async def test_cancel_request_interrupts_the_turn(git_repo: Path, tmp_path: Path) -> None:
    opts = {"model": scripted("slow_reads.json"), "approval": "auto-edit", "db": str(tmp_path / "f.db")}
    async with lsp_session(git_repo, opts) as (client, editor):
        params = types.ExecuteCommandParams(command="teachback.ask", arguments=[{"instruction": "read everything"}])
        pending = asyncio.ensure_future(
            client.protocol.send_request_async(types.WORKSPACE_EXECUTE_COMMAND, params, msg_id="ask-1")
        )
        await wait_for(lambda: started_calls(editor) >= 2, what="two tool calls")
        client.cancel_request(types.CancelParams(id="ask-1"))
        with pytest.raises(JsonRpcException):
            await asyncio.wait_for(pending, timeout=30)
        await wait_for(lambda: "turn_finished" in event_types(editor), what="the turn to stop")
        turn = finished_turn(editor)
        assert turn["reason"] == "interrupted"
        assert turn["steps"] < SCRIPT_STEPS
        # The server keeps serving, and is ready for the next turn once the cancelled request has
        # unwound (the turn's last event can reach the editor a moment before that).
        statuses = []

        async def idle() -> bool:
            statuses.append(await command(client, "teachback.status"))
            return statuses[-1]["running"] is False

        deadline = asyncio.get_running_loop().time() + 10
        while not await idle():
            assert asyncio.get_running_loop().time() < deadline, statuses[-1]
            await asyncio.sleep(0.05)


@pytest.mark.timeout(90)
async def test_cancelling_the_progress_interrupts_the_turn(git_repo: Path, tmp_path: Path) -> None:
    opts = {"model": scripted("slow_reads.json"), "approval": "auto-edit", "db": str(tmp_path / "f.db")}
    async with lsp_session(git_repo, opts) as (client, editor):
        asking = asyncio.ensure_future(command(client, "teachback.ask", "read everything"))
        await wait_for(lambda: started_calls(editor) >= 2, what="two tool calls")
        (token,) = client.progress_reports
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        result = await asyncio.wait_for(asking, timeout=30)
        assert result["reason"] == "interrupted"
        assert result["steps"] < SCRIPT_STEPS
        assert client.progress_reports[token][-1].kind == "end"


@pytest.mark.timeout(90)
async def test_cancel_command_and_requests_served_while_a_turn_runs(git_repo: Path, tmp_path: Path) -> None:
    opts = {"model": scripted("slow_reads.json"), "approval": "auto-edit", "db": str(tmp_path / "f.db")}
    async with lsp_session(git_repo, opts) as (client, editor):
        asking = asyncio.ensure_future(command(client, "teachback.ask", "read everything"))
        await wait_for(lambda: started_calls(editor) >= 1, what="a tool call")
        status = await command(client, "teachback.status", timeout=5)
        assert status["running"] is True
        with pytest.raises(JsonRpcException, match="already running"):
            await command(client, "teachback.ask", "another", timeout=5)
        assert await command(client, "teachback.cancel", timeout=5) == {"cancelled": True}
        result = await asyncio.wait_for(asking, timeout=30)
        assert result["reason"] == "interrupted"
