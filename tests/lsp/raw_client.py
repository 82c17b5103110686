"""A plain JSON-RPC client for the real server: raw bytes in, parsed messages out, a timeout on every read.

pytest-lsp's typed client cannot send broken frames or malformed envelopes, so these tests speak
the wire format themselves, to `python -m lsp_server` over its stdio (or over TCP).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from pygls.uris import from_fs_path

from tests.lsp.harness import REPO

READ_TIMEOUT = 15.0


def frame(message: Any) -> bytes:
    """One correctly framed message; `message` is sent exactly as given (no jsonrpc is added)."""
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def request(msg_id: int, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def status_request(msg_id: int) -> dict[str, Any]:
    return request(msg_id, "workspace/executeCommand", {"command": "teachback.status", "arguments": []})


class RawClient:
    def __init__(self, reader: asyncio.StreamReader, writer: Any) -> None:
        self.reader = reader
        self.writer = writer
        self.seen: list[dict[str, Any]] = []  # every message read so far, in order

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def send(self, message: Any) -> None:
        await self.send_raw(frame(message))

    async def read_message(self, timeout: float = READ_TIMEOUT) -> dict[str, Any]:
        return await asyncio.wait_for(self._read_message(), timeout)

    async def _read_message(self) -> dict[str, Any]:
        length = None
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length is None:
            raise EOFError("the server closed its output (or sent a frame without Content-Length)")
        message = json.loads(await self.reader.readexactly(length))
        self.seen.append(message)
        return message

    async def answer(self, msg_id: Any, timeout: float = READ_TIMEOUT) -> dict[str, Any]:
        """The response to request `msg_id` (None: an error response with a null id)."""
        deadline = asyncio.get_running_loop().time() + timeout
        for message in self.seen:
            if _answers(message, msg_id):
                return message
        while True:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise TimeoutError(f"no answer to request {msg_id!r} within {timeout:g} s; seen {self.seen}")
            message = await self.read_message(left)
            if _answers(message, msg_id):
                return message

    def answered(self, msg_id: Any) -> bool:
        return any(_answers(m, msg_id) for m in self.seen)

    def logged(self) -> str:
        return "\n".join(m["params"]["message"] for m in self.seen if m.get("method") == "window/logMessage")

    async def initialize(self, root: Path) -> dict[str, Any]:
        await self.send(request(0, "initialize", {"capabilities": {}, "rootUri": from_fs_path(str(root))}))
        return await self.answer(0)


def _answers(message: dict[str, Any], msg_id: Any) -> bool:
    return "method" not in message and "id" in message and message["id"] == msg_id


class RawServer(RawClient):
    """`python -m lsp_server` on stdio; its stderr (the log) goes to a file the test can read."""

    def __init__(self, process: asyncio.subprocess.Process, log_path: Path) -> None:
        assert process.stdout is not None and process.stdin is not None
        super().__init__(process.stdout, process.stdin)
        self.process = process
        self.log_path = log_path

    @classmethod
    async def start(cls, log_path: Path, *extra_args: str) -> RawServer:
        with log_path.open("wb") as log:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "lsp_server",
                *extra_args,
                cwd=str(REPO),
                env=dict(os.environ),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
            )
        return cls(process, log_path)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def exit_status(self, timeout: float = READ_TIMEOUT) -> int:
        return await asyncio.wait_for(self.process.wait(), timeout)

    async def stop(self) -> int:
        """Shut down politely (shutdown, then exit) and return the exit status."""
        await self.send(request(999, "shutdown"))
        assert "result" in await self.answer(999)
        await self.send({"jsonrpc": "2.0", "method": "exit"})
        return await self.exit_status()

    async def close(self) -> None:
        """Kill the server if it still runs, and close the pipes while the event loop is alive."""
        if self.process.returncode is None:
            self.process.kill()
        self.writer.close()
        await self.exit_status()
