"""One MCP server's connection, over the official `mcp` library's `Client`.

The library's transports are anyio context managers that must be entered and left by one task, so
each connection is held open by a task of its own (`_hold`) until it is told to stop; tool calls
are requests sent from the session's task. Every wait is bounded: starting by the start-up timeout,
a call by its call timeout, stopping by STOP_SECONDS. The server's stderr goes to a scratch file,
whose last lines explain a server that failed to start or crashed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import mcp.types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from agent.mcp.config import ServerConfig
from agent.mcp.stdio import stdio_transport

log = logging.getLogger(__name__)
STOP_SECONDS = 10.0  # the library's own shutdown of a stdio server is bounded near 6 s
GRACE_SECONDS = 5.0  # past a call's timeout, in case the library's own timer does not fire
MAX_PAGES = 50  # tools/list pages read from one server
STDERR_TAIL_BYTES = 2_000
STDERR_TAIL_LINES = 8


class StartFailed(Exception):
    """The server did not start and list its tools; the message says why."""


class CallFailed(Exception):
    """A call got no result; `kind` is the protocol error kind, the message says why."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Connection:
    def __init__(self, config: ServerConfig, workspace: Path) -> None:
        self.config = config
        self.workspace = workspace
        self._client: Client | None = None
        self._holder: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[list[Any]] | None = None
        self._stop = asyncio.Event()
        self._stderr = tempfile.TemporaryFile() if config.command else None  # noqa: SIM115 (closed in close())
        self._stopping: set[asyncio.Task[None]] = set()  # servers that did not start, being ended

    @property
    def alive(self) -> bool:
        return self._client is not None and self._holder is not None and not self._holder.done()

    async def open(self, timeout: float) -> list[Any]:
        """Start the server and list its tools (mcp.types.Tool), within `timeout` seconds."""
        await self.stop()
        ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._ready, self._stop = ready, asyncio.Event()
        self._holder = asyncio.create_task(self._hold(ready, self._stop), name=f"mcp server {self.config.name}")
        said = self._stderr_size()
        try:
            return await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            # Ending a server that hangs takes seconds (stdin closed, a grace period, SIGTERM): the
            # session goes on meanwhile, and close() waits for it.
            ending = asyncio.create_task(self._end(*self._release()))
            self._stopping.add(ending)
            ending.add_done_callback(self._stopping.discard)
            raise StartFailed(
                f"it did not start and list its tools within {timeout:g} s{self.stderr_tail(said)}"
            ) from None
        except asyncio.CancelledError:
            await self.stop()
            raise
        except Exception as exc:
            await self.stop()
            raise StartFailed(f"{_reason(exc)}{self.stderr_tail(said)}") from exc

    async def call(self, remote: str, arguments: dict[str, Any], timeout: float) -> Any:
        """The server's CallToolResult for `remote(**arguments)`; CallFailed when there is none."""
        client = self._client
        if client is None or not self.alive:
            raise CallFailed("crashed", "the server is not running")
        said = self._stderr_size()
        try:
            return await asyncio.wait_for(
                client.call_tool(remote, arguments, read_timeout_seconds=timeout), timeout + GRACE_SECONDS
            )
        except TimeoutError:
            raise CallFailed("timeout", f"no answer within {timeout:g} s") from None
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                raise CallFailed("timeout", f"no answer within {timeout:g} s") from None
            if exc.code == types.CONNECTION_CLOSED:
                await self.stop()
                raise CallFailed("crashed", f"the server closed the connection{self.stderr_tail(said)}") from None
            kind = "bad_arguments" if exc.code == types.INVALID_PARAMS else "failed"
            raise CallFailed(kind, f"{exc.message} (MCP error {exc.code})") from None
        except ValidationError as exc:
            raise CallFailed(
                "failed", f"its answer is not a valid MCP tool result ({exc.error_count()} problems)"
            ) from None
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:  # the transport broke (a dropped HTTP connection, a closed pipe)
            await self.stop()
            raise CallFailed("crashed", f"{_reason(exc)}{self.stderr_tail(said)}") from None

    async def stop(self) -> None:
        """Stop the server (stdio: close its input, then end it) and wait, boundedly, for that."""
        await self._end(*self._release())

    def _release(self) -> tuple[asyncio.Task[None] | None, asyncio.Future[list[Any]] | None, asyncio.Event]:
        """The running server's task, start and stop signals, no longer this connection's."""
        held = self._holder, self._ready, self._stop
        self._holder, self._ready = None, None
        return held

    async def _end(
        self, holder: asyncio.Task[None] | None, ready: asyncio.Future[list[Any]] | None, stop: asyncio.Event
    ) -> None:
        if holder is None:
            return
        if ready is not None and not ready.done():
            holder.cancel()  # still starting (a handshake that may never end): nothing to wind down
        stop.set()
        done, _ = await asyncio.wait({holder}, timeout=STOP_SECONDS)
        if not done:
            log.warning("MCP server %s did not stop within %g s; abandoning it", self.config.name, STOP_SECONDS)
            holder.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(holder, STOP_SECONDS)

    async def close(self) -> None:
        await self.stop()
        if self._stopping:
            await asyncio.wait(self._stopping, timeout=STOP_SECONDS)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _stderr_size(self) -> int:
        return os.fstat(self._stderr.fileno()).st_size if self._stderr is not None else 0

    def stderr_tail(self, since: int = 0) -> str:
        """The last lines the server wrote on stderr after byte `since`, as a clause to append, or ""."""
        if self._stderr is None:
            return ""
        fd = self._stderr.fileno()
        size = os.fstat(fd).st_size
        start = max(since, size - STDERR_TAIL_BYTES)
        lines = os.pread(fd, size - start, start).decode("utf-8", "replace").splitlines()[-STDERR_TAIL_LINES:]
        text = "\n".join(line for line in lines if line.strip())
        return f"; its last output on stderr:\n{text}" if text else ""

    async def _hold(self, ready: asyncio.Future[list[Any]], stop: asyncio.Event) -> None:
        client: Client | None = None
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(self._client_for(await self._transport(stack)))
                tools = await _list_tools(client)
                self._client = client
                ready.set_result(tools)
                await stop.wait()
        except asyncio.CancelledError:
            ready.cancel()  # open() is no longer waiting for it
            raise
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                log.warning("the connection to MCP server %s ended: %s", self.config.name, _reason(exc))
        finally:
            if client is not None and self._client is client:  # a restarted server's is not this one's
                self._client = None

    async def _transport(self, stack: AsyncExitStack) -> Any:
        config = self.config
        if config.command:
            parameters = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env=dict(config.env) or None,
                cwd=config.cwd or str(self.workspace),
            )
            if sys.platform == "win32":  # the library's own transport starts processes the Windows way
                return stdio_client(parameters, errlog=self._stderr)  # type: ignore[arg-type]
            assert self._stderr is not None
            return stdio_transport(parameters, self._stderr, config.name)
        import httpx2  # the mcp library's HTTP client

        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=dict(config.headers), timeout=httpx2.Timeout(30.0, read=300.0))
        )
        return streamable_http_client(config.url or "", http_client=http)

    @staticmethod
    def _client_for(transport: Any) -> Client:
        from importlib.metadata import PackageNotFoundError, version

        try:
            ours = version("teachback")
        except PackageNotFoundError:
            ours = "0"
        return Client(transport, cache=None, client_info=types.Implementation(name="teachback", version=ours))


async def _list_tools(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _reason(exc: BaseException) -> str:
    """What went wrong, from an exception the library or the transport raised (groups unwrapped)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, FileNotFoundError):
        return f"its command was not found ({exc.filename or exc}); check the command and that it is installed"
    if isinstance(exc, PermissionError):
        return f"its command cannot be run ({exc.strerror}); check its permissions"
    if isinstance(exc, MCPError):
        return f"it answered the handshake with an error: {exc.message} (MCP error {exc.code})"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
