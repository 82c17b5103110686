"""Fast initialize, typed initialization options, and error answers for malformed requests."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcException
from pygls.uris import from_fs_path

from tests.lsp.harness import REPO, command, lsp_session, wait_for


@pytest.mark.timeout(60)
async def test_initialize_is_fast_and_loads_no_litellm(git_repo: Path) -> None:
    timing: dict[str, float] = {}
    # settle: let the process import pygls first, so the figure is initialize's own answer time
    async with lsp_session(git_repo, None, timing=timing, settle=3.0) as (client, _editor):
        assert timing["initialize"] < 1.0
        status = await command(client, "teachback.status")
        assert status["startup"]["litellmLoadedAtInitialize"] is False
        assert status["session"] is None  # nothing heavy starts before the first request needs it
        assert status["workspace"] == str(git_repo)


@pytest.mark.timeout(60)
async def test_invalid_initialization_options_fall_back_with_a_message(git_repo: Path, tmp_path: Path) -> None:
    opts = {"model": "openai/gpt-4o-mini", "approval": "sometimes", "maxSteps": "many", "maxCost": 0.5, "colour": 1}
    async with lsp_session(git_repo, opts) as (client, _editor):
        await wait_for(lambda: len(client.messages) >= 3, what="three warnings")
        text = "\n".join(m.message for m in client.messages)
        assert "approval must be one of" in text and "Using 'ask'" in text
        assert "maxSteps must be a whole number" in text
        assert "unknown key(s) colour" in text
        options = (await command(client, "teachback.status"))["options"]
        assert options == {**options, "model": "openai/gpt-4o-mini", "approval": "ask", "maxSteps": 30, "maxCost": 0.5}


@pytest.mark.timeout(60)
async def test_settings_file_applies_when_options_are_absent(git_repo: Path) -> None:
    (git_repo / "teachback.toml").write_text('approval = "full-auto"\nmax_steps = 7\n')
    async with lsp_session(git_repo, {"maxSteps": 9}) as (client, _editor):
        options = (await command(client, "teachback.status"))["options"]
        assert options["approval"] == "full-auto" and options["maxSteps"] == 9


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "name, arguments, message",
    [
        ("teachback.ask", [{"instruction": 5}], "'instruction' must be a non-empty string"),
        ("teachback.ask", [{"instruction": "x", "uri": "file:///a.py", "range": {"start": "top"}}], "'range'"),
        ("teachback.ask", [], "one object argument"),
        ("teachback.reject", [{"id": 3}], "'id' must be a non-empty string"),
        ("teachback.undo", [1, 2], "takes no arguments"),
        ("teachback.nothing", [], "is not defined"),
    ],
)
async def test_bad_command_arguments_get_an_error_response(
    git_repo: Path, name: str, arguments: list, message: str
) -> None:
    async with lsp_session(git_repo, None) as (client, _editor):
        with pytest.raises(JsonRpcException, match=message):
            await command(client, name, *arguments, timeout=10)


async def _send(stdin: asyncio.StreamWriter, message: dict) -> None:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    await stdin.drain()


async def _receive(stdout: asyncio.StreamReader) -> dict:
    length = 0
    while (line := await stdout.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return json.loads(await stdout.readexactly(length))


@pytest.mark.timeout(60)
async def test_request_whose_params_do_not_parse_gets_an_error_response(git_repo: Path) -> None:
    # Raw JSON-RPC: a typed client cannot even send these params.
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "lsp_server",
        cwd=str(REPO),
        env=dict(os.environ),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        await _send(
            server.stdin,
            {"id": 1, "method": "initialize", "params": {"capabilities": {}, "rootUri": from_fs_path(str(git_repo))}},
        )
        bad = {"textDocument": {"uri": from_fs_path(str(git_repo / "app.py"))}, "range": "all of it", "context": {}}
        await _send(server.stdin, {"id": 2, "method": "textDocument/codeAction", "params": bad})
        answers = {}
        while 2 not in answers:
            message = await asyncio.wait_for(_receive(server.stdout), timeout=20)
            if "id" in message:
                answers[message["id"]] = message
        assert "result" in answers[1]
        assert answers[2]["error"]["code"] == -32602
        assert "do not match the LSP schema" in answers[2]["error"]["message"]
        await _send(server.stdin, {"id": 3, "method": "shutdown"})
        await _send(server.stdin, {"method": "exit"})
        await asyncio.wait_for(server.wait(), timeout=30)
    finally:
        if server.returncode is None:
            server.kill()
