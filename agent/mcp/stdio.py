"""The stdio transport to an MCP server, reading the server's output itself.

The library's stdio transport logs a traceback for every line of output that is not a JSON-RPC
message, and a response whose `result` is not an object is no message to it at all: the call it
answers waits out its whole timeout. Here each line is read once: a message goes to the session; an
answer to a request we sent that is not a valid response (a `result` that is a number, a list, text;
an `error` of the wrong shape) becomes an error response to that request, so the call fails at once
and says why; any other line is logged in one line, without a traceback, and ignored. The process is
started and ended as the library does it (its own process group; stdin closed, a grace period, then
the group terminated).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any, BinaryIO

import anyio
import mcp.types as types
from anyio.abc import Process
from mcp import StdioServerParameters
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from agent.protocol.arguments import json_type
from agent.protocol.lenient_json import TooDeep, check_depth

log = logging.getLogger(__name__)
EXIT_GRACE_SECONDS = 2.0  # for the server to leave on its own once its input is closed
KILL_SECONDS = 2.0  # from SIGTERM to SIGKILL of its process group
MAX_LINE_BYTES = 64 * 2**20  # one message; a longer line is dropped
MAX_DEPTH = 200  # nesting in one message: far past any real one, well below the parser's limit


@asynccontextmanager
async def stdio_transport(
    parameters: StdioServerParameters, errlog: BinaryIO, name: str
) -> AsyncIterator[tuple[Any, Any]]:
    """The server's process and the (read, write) streams the library's Client expects."""
    process = await anyio.open_process(
        [parameters.command, *parameters.args],
        env=get_default_environment() | (parameters.env or {}),
        stderr=errlog,
        cwd=parameters.cwd,
        start_new_session=True,  # its own process group, ended as a whole
    )
    reader_side, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, writer_side = anyio.create_memory_object_stream[SessionMessage](0)
    lines = _Lines(name)

    async def read() -> None:
        assert process.stdout is not None
        async with reader_side:
            with suppress(anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                async for line in _split(process.stdout, name):
                    message = lines.read(line)
                    if message is not None:
                        await reader_side.send(message)

    async def write() -> None:
        assert process.stdin is not None
        async with writer_side:
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                async for outgoing in writer_side:
                    lines.sent(outgoing.message)
                    text = outgoing.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(text.encode() + b"\n")
        await reader_side.aclose()  # the server cannot be written to: the session sees the end

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read)
        tasks.start_soon(write)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):  # a cancelled caller must not leave the server running
                write_stream.close()
                read_stream.close()
                await _stop(process)
            tasks.cancel_scope.cancel()


async def _split(stdout: Any, name: str) -> AsyncIterator[bytes]:
    """The lines of the server's output, each at most MAX_LINE_BYTES (a longer one is dropped)."""
    buffer = b""
    dropping = False
    async for chunk in stdout:
        *complete, buffer = (buffer + chunk).split(b"\n")
        for line in complete:
            if dropping:
                dropping = False  # the end of the line too long to keep
            else:
                yield line
        if len(buffer) > MAX_LINE_BYTES:
            if not dropping:
                log.warning("MCP server %s sent a line over %d MB; it was ignored", name, MAX_LINE_BYTES // 2**20)
            buffer, dropping = b"", True


class _Lines:
    """Reads the server's lines into messages, knowing which requests wait for an answer."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.waiting: set[Any] = set()  # ids of requests sent and not yet answered
        self.warned = False

    def sent(self, message: Any) -> None:
        if isinstance(message, types.JSONRPCRequest):
            self.waiting.add(message.id)

    def read(self, line: bytes) -> SessionMessage | None:
        text = line.decode("utf-8", errors="replace").strip()
        if not text:
            return None
        try:
            check_depth(text, MAX_DEPTH)
        except TooDeep:
            return self._ignore(f"nested more than {MAX_DEPTH} levels deep")
        try:
            message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
        except ValidationError as exc:
            try:
                value = json.loads(text)
            except (ValueError, RecursionError) as bad:  # JSONDecodeError is a ValueError
                return self._ignore(f"not JSON ({str(bad).split(':')[0]})")
            return self._invalid(value, exc)
        if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
            self.waiting.discard(message.id)
        return SessionMessage(message)

    def _invalid(self, value: Any, exc: ValidationError) -> SessionMessage | None:
        """A JSON value that is not a JSON-RPC message: the answer to a waiting request becomes an
        error answer to it; anything else is ignored."""
        ident = value.get("id") if isinstance(value, dict) else None
        answers = isinstance(value, dict) and ("result" in value or "error" in value)
        if not answers or type(ident) not in (int, str) or ident not in self.waiting:
            return self._ignore(f"{_a(json_type(value))} but not a JSON-RPC message ({exc.error_count()} problems)")
        self.waiting.discard(ident)
        result = value.get("result")
        why = (
            f"its result is {_a(json_type(result))}, not an object"
            if "result" in value and not isinstance(result, dict)
            else f"its answer is not a valid JSON-RPC response ({exc.error_count()} problems)"
        )
        log.info("MCP server %s answered request %r with an invalid response: %s", self.name, ident, why)
        error = types.ErrorData(code=types.INTERNAL_ERROR, message=f"the server's answer is not valid: {why}")
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=ident, error=error))

    def _ignore(self, what: str) -> None:
        # Said once per server at warning level (a server that writes logs on stdout would flood it).
        level = logging.DEBUG if self.warned else logging.WARNING
        log.log(level, "MCP server %s sent a line that is %s; it was ignored", self.name, what)
        self.warned = True
        return None


def _a(name: str) -> str:
    return name if name == "null" else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


async def _stop(process: Process) -> None:
    """Close the server's input, give it a grace period to leave, then end its process group."""
    assert process.stdin is not None and process.stdout is not None
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if not await _exited(process, EXIT_GRACE_SECONDS):
        await terminate_posix_process_tree(process, KILL_SECONDS)
        if not await _exited(process, KILL_SECONDS):
            log.warning("MCP server process %d is still alive after SIGKILL; leaving it", process.pid)
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()


async def _exited(process: Process, seconds: float) -> bool:
    """Whether the process ended within `seconds` (its return code polled: waiting for it would also
    wait for its pipes, which a child it started may hold open)."""
    with anyio.move_on_after(seconds):
        while process.returncode is None:
            await anyio.sleep(0.01)
    return process.returncode is not None
