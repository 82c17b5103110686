"""Serve one session over JSON lines: the child side of `agent.remote`.

A frontend that must never wait on the agent (the language server) runs its turns in a child
process that speaks this protocol on its stdin and stdout, one JSON object per line:

- parent -> child requests `{"id", "method", "params"}`: `open` (the opener's parameters), `submit`
  (`{"op"}`: any Op of agent.protocol; answers `{"reply"}`, the event the session's `submit`
  returned or null, and for an op that runs a turn also `"changes"`, the turn's net file changes) and `close`;
- parent -> child notifications `{"method", "params"}`: `submit` (an Op whose answer nobody waits
  for: an interrupt), and `overlay_set` / `overlay_remove` (the editor's unsaved buffers, which the
  turn's tools read);
- child -> parent: `{"event"}` for every event the session emits, in order, and
  `{"id", "result"}` or `{"id", "error": {"type", "message", "kind"?}}` for each request;
- child -> parent calls `{"call", "method", "params"}` (a tool asking the frontend, e.g. for an
  editor's buffer: see `ParentCalls`), answered by `{"reply", "result"}` or `{"reply", "error"}`.

Requests are served concurrently (approvals and reviews arrive while a turn is in flight);
notifications are applied in the order they arrive. End of input closes the session and exits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

from agent.interfaces import SessionClient
from agent.protocol import ReviewPlan, UserInput, op_from_dict

log = logging.getLogger(__name__)

WORKER_NICE = 5  # added to a worker's niceness: the editor's requests come first (weight 1024 : 335)
LINE_LIMIT = 2**30  # one event can carry whole files and conversations
# Errors whose type the parent re-raises as the same class (see agent.remote); any other is a bug.
EXPECTED_ERRORS = ("ReviewError", "WorkspaceError", "UndoError", "KeyError", "RuntimeError")


class OverlaySink(Protocol):
    def set(self, path: str, text: str, version: int | None = None) -> None: ...

    def remove(self, path: str) -> None: ...


@dataclass
class Opened:
    """What an opener built: the session, where the editor's buffers go, and facts for the parent."""

    session: SessionClient
    sink: OverlaySink
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    on_close: Callable[[], None] | None = None  # e.g. flush the recorder


Opener = Callable[[dict[str, Any]], Awaitable[Opened]]


class LineWriter:
    """One JSON object per line on a binary stream, whole lines only, from any thread."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, ensure_ascii=False).encode() + b"\n"
        with self._lock:
            self._out.write(data)
            self._out.flush()


class ParentCallFailed(Exception):
    """The parent could not answer a call (it said why, did not answer in time, or is gone)."""


class ParentCalls:
    """Calls from the child to the parent, made from a tool's thread (never the event loop's, which
    reads the answers): `call` blocks until the parent replies."""

    def __init__(self, send: Callable[[dict[str, Any]], None]) -> None:
        self._send = send
        self._pending: dict[int, concurrent.futures.Future[Any]] = {}
        self._lock = threading.Lock()
        self._next = 1
        self._closed = False

    def call(self, method: str, params: dict[str, Any], timeout: float) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise ParentCallFailed("the session is closing")
            number, self._next = self._next, self._next + 1
            self._pending[number] = future
        try:
            self._send({"call": number, "method": method, "params": params})
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise ParentCallFailed(f"{method}: no answer within {timeout:g} s") from None
        finally:
            with self._lock:
                self._pending.pop(number, None)

    def answered(self, message: dict[str, Any]) -> None:
        with self._lock:
            future = self._pending.get(message.get("reply"))  # type: ignore[arg-type]
        if future is None or future.done():
            return
        if "error" in message:
            future.set_exception(ParentCallFailed(str(message["error"])))
        else:
            future.set_result(message.get("result"))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            pending = list(self._pending.values())
        for future in pending:
            if not future.done():
                future.set_exception(ParentCallFailed("the session closed"))


class SessionServer:
    def __init__(self, opener: Opener, writer: LineWriter, calls: ParentCalls | None = None) -> None:
        self._opener = opener
        self._writer = writer
        self._calls = calls
        self._opened: Opened | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = asyncio.Event()

    async def serve(self, reader: asyncio.StreamReader) -> None:
        reading = asyncio.ensure_future(self._read(reader))
        closing = asyncio.ensure_future(self._closed.wait())
        await asyncio.wait({reading, closing}, return_when=asyncio.FIRST_COMPLETED)
        reading.cancel()
        closing.cancel()
        await self.close()

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while line := await reader.readline():
            try:
                message = json.loads(line)
            except json.JSONDecodeError as exc:
                log.error("dropped a line that is not JSON from the parent: %s", exc)
                continue
            if "reply" in message and self._calls is not None:
                self._calls.answered(message)
            elif "id" in message:
                task = asyncio.ensure_future(self._answer(message))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            else:
                self._notified(message.get("method"), message.get("params") or {})

    def _notified(self, method: str | None, params: dict[str, Any]) -> None:
        if self._opened is None:
            log.warning("ignored %s before open", method)
        elif method == "submit":
            self._submit_unanswered(params.get("op"))
        elif method == "overlay_set":
            self._opened.sink.set(params["path"], params["text"], params.get("version"))
        elif method == "overlay_remove":
            self._opened.sink.remove(params["path"])
        else:
            log.warning("ignored the unknown notification %r", method)

    async def _answer(self, message: dict[str, Any]) -> None:
        msg_id, method = message["id"], message.get("method")
        try:
            result = await self._call(method, message.get("params") or {})
        except Exception as exc:  # every request gets an answer; the parent raises it again
            kind = type(exc).__name__
            if kind not in EXPECTED_ERRORS:
                log.exception("request %s failed", method)
            error = {"type": kind, "message": exc.args[0] if exc.args else str(exc)}
            if hasattr(exc, "kind"):
                error["kind"] = exc.kind
            self._writer.send({"id": msg_id, "error": error})
        else:
            self._writer.send({"id": msg_id, "result": result})

    async def _call(self, method: str | None, params: dict[str, Any]) -> Any:
        if method == "open":
            return await self._open(params)
        if method == "close":
            self._closed.set()  # serve() closes the session once this answer is out
            return None
        if self._opened is None:
            raise RuntimeError(f"{method} before open: send open first")
        if method != "submit":
            raise RuntimeError(f"unknown method {method!r}")
        session = self._opened.session
        op = op_from_dict(params["op"])
        reply = await session.submit(op)
        answer: dict[str, Any] = {"reply": reply.to_dict() if reply is not None else None}
        if isinstance(op, (UserInput, ReviewPlan)):  # each runs a turn
            answer["changes"] = [dataclasses.asdict(c) for c in session.last_turn_changes()]
        return answer

    def _submit_unanswered(self, data: Any) -> None:
        """Serve an op sent as a notification: its reply goes nowhere, a failure only to the log."""
        assert self._opened is not None
        try:
            op = op_from_dict(data)
        except (TypeError, ValueError) as exc:  # a parent of another version: the reader must go on
            log.error("ignored an op that does not parse: %s", exc)
            return
        task = asyncio.ensure_future(self._opened.session.submit(op))
        task.add_done_callback(_log_failure)

    async def _open(self, params: dict[str, Any]) -> dict[str, Any]:
        if self._opened is not None:
            raise RuntimeError("the session is already open")
        opened = await self._opener(params)
        opened.session.subscribe(lambda event: self._writer.send({"event": event.to_dict()}))
        self._opened = opened
        return {"session_id": opened.session.id, **opened.info}

    async def close(self, wait: float = 10.0) -> None:
        """Stop a running turn (it still emits its TurnFinished), then close the session."""
        opened, self._opened = self._opened, None
        if self._calls is not None:
            self._calls.close()  # a tool waiting on the parent stops waiting
        if opened is None:
            return
        opened.session.interrupt()
        running = [t for t in self._tasks if t is not asyncio.current_task()]
        if running:
            await asyncio.wait(running, timeout=wait)
        await opened.session.close()
        for task in running:
            task.cancel()
        if opened.on_close is not None:
            opened.on_close()


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("an op sent without waiting for its answer failed: %r", task.exception())


async def serve(opener: Opener, inp: BinaryIO, out: BinaryIO) -> None:
    """Serve until the parent sends `close` or closes our input."""
    await serve_with(SessionServer(opener, LineWriter(out)), inp)


async def serve_with(server: SessionServer, inp: BinaryIO) -> None:
    """Serve `server` (built on a writer of its own, with calls to the parent) on `inp`."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), inp)
    await server.serve(reader)


# -- a protocol process's own stdout and log -------------------------------------------------------


def protocol_stream(buffered: bool = True) -> BinaryIO:
    """The real stdout, for the protocol alone; anything else written to fd 1 (a library's print,
    native code's logging) goes to stderr instead of corrupting it."""
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "wb") if buffered else os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def log_to_stderr(name: str) -> None:
    """Log at TEACHBACK_LOG_LEVEL (default WARNING) to stderr, each line naming the process."""
    logging.basicConfig(
        stream=sys.stderr,
        level=os.environ.get("TEACHBACK_LOG_LEVEL", "WARNING").upper(),
        format=f"%(asctime)s {name} %(name)s %(levelname)s %(message)s",
    )


def start_worker(name: str) -> BinaryIO:
    """Set up a worker process (lower priority, the protocol's stdout, logging); its protocol stream.
    Call it before any thread starts: on Linux each thread inherits its creator's niceness."""
    try:
        os.nice(WORKER_NICE)
    except (AttributeError, OSError) as exc:  # no os.nice on Windows; a sandbox may refuse it
        log.info("the agent's process keeps its priority: %s", exc)
    out = protocol_stream()
    log_to_stderr(name)
    return out
