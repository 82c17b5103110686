"""`teachback lsp` and `teachback acp` started by hand on a terminal say what they are on stderr;
started by an editor (stdin a pipe) they say nothing and speak only the protocol."""

from __future__ import annotations

import json
import os
import pty
import selectors
import subprocess
import sys
import time

import pytest

TEACHBACK = [sys.executable, "-m", "cli"]


def _read_stderr_until(process: subprocess.Popen, needle: bytes, seconds: float) -> bytes:
    """What the process wrote on stderr, up to `needle` or until `seconds` pass."""
    assert process.stderr is not None
    seen = b""
    deadline = time.monotonic() + seconds
    with selectors.DefaultSelector() as selector:
        selector.register(process.stderr, selectors.EVENT_READ)
        while needle not in seen and (left := deadline - time.monotonic()) > 0:
            if not selector.select(left):
                break
            chunk = os.read(process.stderr.fileno(), 4096)
            if not chunk:
                break
            seen += chunk
    return seen


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "door, says",
    [
        ("lsp", ["is a language server", '"In your editor"', "teachback tui"]),
        ("acp", ["is an Agent Client Protocol agent", '"Agent panels: teachback acp"', "teachback tui"]),
    ],
)
def test_a_door_started_on_a_terminal_says_what_it_is(door: str, says: list[str]) -> None:
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [*TEACHBACK, door], stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy()
    )
    os.close(terminal)
    try:
        text = _read_stderr_until(process, b"Ctrl-C quits.", 30).decode()
        assert process.poll() is None  # it still waits for an editor, as before
    finally:
        process.kill()
        process.wait(timeout=30)
        os.close(controller)
    for part in says:
        assert part in text, text


def _message(payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


@pytest.mark.timeout(60)
def test_the_language_server_over_pipes_says_nothing_and_answers(tmp_path) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}},
    }
    exit_ = {"jsonrpc": "2.0", "method": "exit"}
    shutdown = {"jsonrpc": "2.0", "id": 2, "method": "shutdown"}
    done = subprocess.run(
        [*TEACHBACK, "lsp"],
        input=_message(initialize) + _message(shutdown) + _message(exit_),
        capture_output=True,
        timeout=50,
        env=os.environ.copy(),
    )
    assert b'"id": 1' in done.stdout or b'"id":1' in done.stdout, done.stdout
    assert b"language server" not in done.stderr and b"In your editor" not in done.stderr, done.stderr


@pytest.mark.timeout(60)
def test_the_acp_agent_over_pipes_says_nothing_and_answers() -> None:
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    done = subprocess.run(
        [*TEACHBACK, "acp"],
        input=(json.dumps(initialize) + "\n").encode(),
        capture_output=True,
        timeout=50,
        env=os.environ.copy(),
    )
    answer = json.loads(done.stdout.decode().splitlines()[0])
    assert answer["id"] == 1 and "result" in answer, done.stdout
    assert b"Agent Client Protocol" not in done.stderr and b"Agent panels" not in done.stderr, done.stderr
