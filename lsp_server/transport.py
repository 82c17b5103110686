"""Serve the language server over stdio or TCP through teachback's own frame reader.

pygls's `start_io`/`start_tcp` loops stop hearing the editor after one bad frame (framing.py says
why); these loops report the bad frame to the editor's log and carry on with the next message.
stdin is read in a daemon thread so that a read blocked on a silent editor never holds the process
open after `exit`. The return value is the process's exit status: the `exit` notification's (0
after `shutdown`, 1 without), 1 when the stream breaks off inside a message or cannot be read.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import threading
from collections.abc import Awaitable, Callable
from typing import BinaryIO, cast

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer

from lsp_server.framing import BadFrame, Event, FrameParser, NotJson
from lsp_server.rpc import TeachbackProtocol

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
Read = Callable[[], Awaitable[bytes]]


def serve_stdio(server: LanguageServer, stdin: BinaryIO, stdout: BinaryIO) -> int:
    server.protocol.set_writer(StdoutWriter(stdout))
    return _run(server, _serve_stdio(server, stdin))


def serve_tcp(server: LanguageServer, host: str, port: int) -> int:
    """Serve the first client that connects, like pygls; its session decides the exit status."""
    return _run(server, _serve_tcp(server, host, port))


def _run(server: LanguageServer, serving: Awaitable[int]) -> int:
    try:
        return asyncio.run(serving)  # type: ignore[arg-type]
    except SystemExit as stop:  # raised by pygls's handler of the `exit` notification
        return stop.code if isinstance(stop.code, int) else 1
    except OSError as exc:  # BrokenPipeError included: the editor went away
        log.error("the connection to the editor failed (%s); stopping so the editor can restart the server", exc)
        return 1
    finally:
        server.shutdown()


async def pump(read: Read, server: LanguageServer) -> int:
    """Feed the byte stream to the frame parser and each message to the protocol until EOF."""
    parser = FrameParser()
    while chunk := await read():
        for event in parser.feed(chunk):
            _deliver(server, event)
    if parser.mid_frame:
        log.error("the editor's stream ended inside a message; exiting with status 1")
        return 1
    return 0


def _deliver(server: LanguageServer, event: Event) -> None:
    protocol = cast(TeachbackProtocol, server.protocol)
    if isinstance(event, BadFrame):
        message = (
            f"teachback dropped a malformed message from the editor ({event.reason}) and resumed "
            "at the next Content-Length header; a request in it gets no answer."
        )
        log.warning("%s", message)
        server.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=message))
    elif isinstance(event, NotJson):
        protocol.refuse_unparsable(event.reason)
    else:
        try:
            protocol.receive(event.data)
        except Exception as exc:  # a failing handler must not stop the reader; pygls's loop does the same
            log.exception("could not handle a message from the editor")
            server.report_server_error(exc, JsonRpcException)


async def _serve_stdio(server: LanguageServer, stdin: BinaryIO) -> int:
    return await pump(_read_in_thread(stdin), server)


def _read_in_thread(stream: BinaryIO) -> Read:
    # The file descriptor, not the buffered stream: a daemon thread blocked in a buffered read
    # holds its lock, and the interpreter then aborts at exit trying to take it.
    fd = stream.fileno()
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[bytes | OSError] = asyncio.Queue(maxsize=16)

    def read_stream() -> None:
        while True:
            chunk: bytes | OSError
            try:
                chunk = os.read(fd, CHUNK)
            except OSError as exc:
                chunk = exc
            try:
                asyncio.run_coroutine_threadsafe(chunks.put(chunk), loop).result()
            except (RuntimeError, concurrent.futures.CancelledError):
                return  # the event loop has finished: the server is exiting
            if not isinstance(chunk, bytes) or not chunk:
                return

    async def read() -> bytes:
        chunk = await chunks.get()
        if isinstance(chunk, OSError):
            raise chunk
        return chunk

    threading.Thread(target=read_stream, name="teachback-stdin", daemon=True).start()
    return read


async def _serve_tcp(server: LanguageServer, host: str, port: int) -> int:
    finished: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if finished.done():
            writer.close()
            return
        server.protocol.set_writer(writer)  # type: ignore[arg-type]
        try:
            status = await pump(lambda: reader.read(CHUNK), server)
        except OSError as exc:
            log.error("the connection to the editor failed (%s)", exc)
            status = 1
        if not finished.done():
            finished.set_result(status)

    listener = await asyncio.start_server(session, host, port)
    async with listener:
        return await finished
