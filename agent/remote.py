"""A session in a child process, driven over JSON lines (the protocol is in agent.session_server).

`RemoteSession` is a session client (agent.interfaces.SessionClient: submit, run, interrupt,
subscribe, close) whose every Op crosses as one wire method, so a frontend can run its turns in a
process of their own: the model, the
tools and the recorder then never hold the frontend's interpreter, and a crash in them ends the
child, not the frontend. What a frontend needs of the workspace on its side (writing the files it
hands to an editor, reading what is on disk) it does through `workspace`, a Workspace on the same
root; the editor's unsaved buffers go to the child through `overlay`.

When the child ends without being asked to, every call waiting on it raises `WorkerStopped`, whose
message says how it ended, and `on_stop` is told. The child's own calls to the frontend (a tool
reading an editor's buffer) are answered by `on_call`; without one they are refused.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from agent.listeners import Listeners
from agent.protocol import Event, Interrupt, Op, ReviewPlan, TurnFinished, UserInput, event_from_dict
from agent.workspace import FileChange, Workspace

log = logging.getLogger(__name__)

LINE_LIMIT = 2**30
CLOSE_WAIT = 15.0  # seconds the child gets to finish its turn and exit after `close`
# error type -> module whose class of that name is raised again here (agent.session_server)
ERROR_CLASSES = {
    "ReviewError": "agent.review",
    "WorkspaceError": "agent.workspace",
    "UndoError": "agent.checkpoint",
}


class WorkerStopped(Exception):
    """The child process ended (or could not start); the message says how."""


class RemoteError(Exception):
    """The child failed to serve a request for a reason of its own (a bug: its log has the details)."""


class RemoteOverlay:
    """The editor's buffers, forwarded to the child; a burst of changes to one file sends one line."""

    def __init__(self, remote: RemoteSession) -> None:
        self._remote = remote
        self._pending: dict[str, tuple[str, int | None] | None] = {}
        self._scheduled = False

    def set(self, path: str, text: str, version: int | None = None) -> None:
        self._pending[path] = (text, version)
        self._schedule()

    def remove(self, path: str) -> None:
        self._pending[path] = None
        self._schedule()

    def flush(self) -> None:
        pending, self._pending, self._scheduled = self._pending, {}, False
        for path, buffer in pending.items():
            if buffer is None:
                self._remote.notify("overlay_remove", {"path": path})
            else:
                self._remote.notify("overlay_set", {"path": path, "text": buffer[0], "version": buffer[1]})

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)


class RemoteSession:
    def __init__(
        self,
        argv: Sequence[str],
        root: str | Path,
        *,
        env: dict[str, str] | None = None,
        on_stop: Callable[[str], None] | None = None,
        on_call: Callable[[str, dict[str, Any]], Awaitable[Any]] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.on_call = on_call
        self._calls: set[asyncio.Task[None]] = set()
        self.env = env
        self.workspace = Workspace(root)
        self.overlay = RemoteOverlay(self)
        self.id: str | None = None
        self.info: dict[str, Any] = {}
        self.on_stop = on_stop
        self._process: asyncio.subprocess.Process | None = None
        self._spawned: asyncio.Future[None] | None = None
        self._reader: asyncio.Task[None] | None = None
        self.listeners = Listeners()
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next_id = 1
        self._changes: list[FileChange] = []
        self._stopped: str | None = None  # why the child is gone, once it is
        self._closing = False

    # -- the process ----------------------------------------------------------------------------

    async def spawn(self) -> None:
        """Start the child (it may warm up its imports while nothing is asked of it yet); once."""
        if self._spawned is None:
            self._spawned = asyncio.ensure_future(self._start())
        await asyncio.shield(self._spawned)

    async def _start(self) -> None:
        try:
            self._process = await asyncio.create_subprocess_exec(
                *self.argv,
                env=self.env,
                limit=LINE_LIMIT,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            self._stopped = f"the agent's process could not start ({exc})"
            raise WorkerStopped(self._stopped) from exc
        self._reader = asyncio.ensure_future(self._read())

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        """Starting or running: not ended."""
        return self._stopped is None

    async def open(self, params: dict[str, Any]) -> dict[str, Any]:
        await self.spawn()
        self.info = await self._request("open", params)
        self.id = self.info["session_id"]
        return self.info

    async def close(self, wait: float = CLOSE_WAIT) -> None:
        """Ask the child to finish (a running turn is interrupted) and wait for it; kill it if it hangs."""
        if self._spawned is not None and not self._spawned.done():
            await asyncio.wait({self._spawned})
        process = self._process
        if process is None or process.returncode is not None:
            return
        self._closing = True
        if self._stopped is None:
            self._send({"id": 0, "method": "close"})
            assert process.stdin is not None
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), wait)
        except TimeoutError:
            log.warning("the agent's process did not exit within %g s; killing it", wait)
            process.kill()
            await process.wait()
        if self._reader is not None:
            await self._reader

    # -- the session's calls --------------------------------------------------------------------

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        return self.listeners.subscribe(callback)

    async def submit(self, op: Op) -> Event | None:
        """Serve `op` in the child's session; its reply event (see agent.session.Session.submit)."""
        if isinstance(op, (UserInput, ReviewPlan)):
            self._changes = []  # a turn that fails leaves no stale changes behind
        answer = await self._request("submit", {"op": op.to_dict()})
        if "changes" in answer:
            self._changes = [FileChange(**c) for c in answer["changes"]]
        return event_from_dict(answer["reply"]) if answer["reply"] is not None else None

    async def run(self, op: UserInput) -> TurnFinished:
        return await self.submit(op)  # type: ignore[return-value]

    def interrupt(self) -> None:
        """Submit an Interrupt without waiting for its answer (a turn may be waiting on the model)."""
        self.notify("submit", {"op": Interrupt().to_dict()})

    def last_turn_changes(self) -> list[FileChange]:
        """Each file the last turn changed (its content at turn start and at turn end)."""
        return list(self._changes)

    # -- the wire -------------------------------------------------------------------------------

    def notify(self, method: str, params: dict[str, Any]) -> None:
        if self._process is not None and self.alive:
            if method not in ("overlay_set", "overlay_remove"):
                self.overlay.flush()  # the child sees the buffers as they were when this was sent
            self._send({"method": method, "params": params})

    async def _request(self, method: str, params: dict[str, Any]) -> Any:
        await self.spawn()
        if not self.alive:
            raise WorkerStopped(self._stopped or "the agent's process is not running")
        self.overlay.flush()
        msg_id, self._next_id = self._next_id, self._next_id + 1
        future = self._pending[msg_id] = asyncio.get_running_loop().create_future()
        self._send({"id": msg_id, "method": method, "params": params})
        return await future

    def _send(self, message: dict[str, Any]) -> None:
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.write(json.dumps(message, ensure_ascii=False).encode() + b"\n")

    async def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        try:
            while line := await stdout.readline():
                self._received(json.loads(line))
                await asyncio.sleep(0)  # a burst of events must not keep the frontend's loop to itself
        except (ValueError, OSError) as exc:  # a broken line or pipe: the child is of no more use
            log.error("reading from the agent's process failed: %s", exc)
            self._process.kill()
        await self._ended(await self._process.wait())

    def _received(self, message: dict[str, Any]) -> None:
        if "event" in message:
            self._deliver(message["event"])
            return
        if "call" in message:
            task = asyncio.ensure_future(self._answer_call(message))
            self._calls.add(task)
            task.add_done_callback(self._calls.discard)
            return
        future = self._pending.pop(message.get("id"), None)  # type: ignore[arg-type]
        if future is None or future.done():
            return
        if "error" in message:
            future.set_exception(_error(message["error"]))
        else:
            future.set_result(message.get("result"))

    def _deliver(self, data: dict[str, Any]) -> None:
        try:
            event = event_from_dict(data)
        except (TypeError, ValueError) as exc:  # a child of another version: skip what we cannot read
            log.error("skipped an event from the agent's process that does not parse: %s", exc)
            return
        self.listeners.emit(event)

    async def _answer_call(self, message: dict[str, Any]) -> None:
        number, method = message["call"], str(message.get("method"))
        if self.on_call is None:
            reply = {"reply": number, "error": f"{method} is not offered by this frontend"}
        else:
            try:
                reply = {"reply": number, "result": await self.on_call(method, message.get("params") or {})}
            except Exception as exc:  # the child must get an answer; it falls back on its own tools
                log.info("the frontend could not answer %s: %s", method, exc)
                reply = {"reply": number, "error": f"{type(exc).__name__}: {exc}"}
        if self._process is not None and self.alive:
            self._send(reply)

    async def _ended(self, status: int) -> None:
        self._stopped = "the agent's process " + ("exited" if self._closing else f"stopped ({_how(status)})")
        for future in self._pending.values():
            if not future.done():
                future.set_exception(WorkerStopped(self._stopped))
        self._pending.clear()
        if not self._closing and self.on_stop is not None:
            self.on_stop(self._stopped)


def _how(status: int) -> str:
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit status {status}"


def _error(data: dict[str, Any]) -> Exception:
    kind, message = data.get("type"), data.get("message", "")
    if kind in ERROR_CLASSES:
        cls = getattr(importlib.import_module(ERROR_CLASSES[kind]), kind)
        return cls(message, data["kind"]) if "kind" in data else cls(message)
    if kind == "KeyError":
        return KeyError(message)
    return RemoteError(f"{message} ({kind} in the agent's process; its log has the details)")
