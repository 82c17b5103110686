"""The agent's commands in the editor's terminal (ACP `terminal/*`), asked for by a session's worker
(acp_server.worker_terminal).

One command is created in a terminal of the editor, shown in its tool call (terminal
content, so its output streams in the editor and the user can stop it there), waited for until its
timeout (then killed), its output read, and the terminal released. Every answer of the editor is
checked and every request bounded: an answer that is malformed, refused or late fails the command
with a message that says which request and what came back, and a terminal already created is still
killed and released. `session/cancel` kills the session's running commands.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from acp import RequestError
from acp.schema import EnvVariable
from pydantic import ValidationError

from acp_server.worker_terminal import STEP_TIMEOUT
from agent.protocol import Event, ToolCallFinished, ToolCallStarted

log = logging.getLogger(__name__)

OUTPUT_LIMIT = 1_000_000  # bytes of output the editor keeps for the agent (the model reads its head and tail)
T = TypeVar("T")


class TerminalError(RuntimeError):
    """The editor's terminal failed one command; the message says at which request and how."""


class Late(TerminalError):
    """The editor did not answer a request in time."""


class EditorTerminals:
    """A session's commands in the editor's terminals. `show(call_id, terminal_id)` puts a terminal in
    the tool call that asked for it."""

    def __init__(self, client: Any, session_id: str, show: Callable[[str, str], None]) -> None:
        self.client = client  # acp.interfaces.Client: the editor
        self.session_id = session_id
        self._show = show
        self._open_calls: dict[str, str] = {}  # call id -> command, of command calls started, not finished
        self._running: set[str] = set()  # terminal ids of commands not yet ended

    def note(self, event: Event) -> None:
        """Follow the session's command calls (their tool declares a command line), to know which
        call a command belongs to."""
        if isinstance(event, ToolCallStarted):
            command = event.call_roles.command_of(event.args)
            if command is not None:
                self._open_calls[event.call_id] = command
        elif isinstance(event, ToolCallFinished):
            self._open_calls.pop(event.call_id, None)

    async def run(self, params: dict[str, Any]) -> dict[str, Any]:
        """Run one command as the worker asked; how it ended (see worker_terminal.terminal_run)."""
        argv, cwd, env, timeout, command = _request(params)
        created = await self._step(
            "terminal/create",
            self.client.create_terminal(
                session_id=self.session_id,
                command=argv[0],
                args=argv[1:],
                cwd=cwd,
                env=[EnvVariable(name=name, value=value) for name, value in env.items()],
                output_byte_limit=OUTPUT_LIMIT,
            ),
        )
        terminal_id = created.terminal_id
        if not terminal_id:
            raise TerminalError("the editor answered terminal/create with an empty terminalId")
        self._running.add(terminal_id)
        try:
            return await self._follow(terminal_id, command, timeout)
        finally:
            self._running.discard(terminal_id)
            await self._release(terminal_id)

    async def kill_all(self) -> None:
        """Stop every command still running (the turn was cancelled); each terminal is released by its run."""
        for terminal_id in list(self._running):
            try:
                await self._step(
                    "terminal/kill", self.client.kill_terminal(session_id=self.session_id, terminal_id=terminal_id)
                )
            except TerminalError as exc:
                log.warning("could not stop a command in the editor's terminal: %s", exc)

    async def _follow(self, terminal_id: str, command: str, timeout: float) -> dict[str, Any]:
        call_id = next((call for call, sent in reversed(self._open_calls.items()) if sent == command), None)
        if call_id is not None:
            self._show(call_id, terminal_id)
        ids = {"session_id": self.session_id, "terminal_id": terminal_id}
        timed_out = False
        exited: Any = None
        try:
            exited = await self._step("terminal/wait_for_exit", self.client.wait_for_terminal_exit(**ids), timeout)
        except Late:  # the command's own timeout
            timed_out = True
            await self._step("terminal/kill", self.client.kill_terminal(**ids))
        output = await self._step("terminal/output", self.client.terminal_output(**ids))
        status = (
            output.exit_status if exited is None or (exited.exit_code is None and exited.signal is None) else exited
        )
        code = status.exit_code if status is not None else None
        signal = status.signal if status is not None else None
        if code is None and signal is None and not timed_out:
            raise TerminalError(
                "the editor's terminal reported neither an exit code nor a signal for the command "
                "(terminal/wait_for_exit and terminal/output)"
            )
        text, truncated = output.output, output.truncated
        if len(text) > OUTPUT_LIMIT:  # an editor that kept more than asked: the end is what counts
            text, truncated = text[-OUTPUT_LIMIT:], True
        return {"output": text, "exit_code": code, "signal": signal, "timed_out": timed_out, "truncated": truncated}

    async def _release(self, terminal_id: str) -> None:
        try:
            await self._step(
                "terminal/release", self.client.release_terminal(session_id=self.session_id, terminal_id=terminal_id)
            )
        except TerminalError as exc:  # the command's outcome is known; the editor keeps a terminal open
            log.warning("could not release the editor's terminal %s: %s", terminal_id, exc)

    async def _step(self, method: str, request: Awaitable[T], timeout: float = STEP_TIMEOUT) -> T:
        """One request to the editor, its answer checked and bounded in time."""
        try:
            return await asyncio.wait_for(request, timeout)
        except TimeoutError:
            raise Late(f"the editor did not answer {method} within {timeout:g} s") from None
        except ValidationError as exc:
            raise TerminalError(f"the editor's answer to {method} is malformed ({_problem(exc)})") from None
        except RequestError as exc:
            raise TerminalError(f"the editor refused {method}: {exc} {exc.data or ''}".strip()) from None
        except ConnectionError as exc:
            raise TerminalError(f"the editor went away during {method}: {exc}") from None


def _request(params: dict[str, Any]) -> tuple[list[str], str, dict[str, str], float, str]:
    """The worker's request, checked (it comes from another process)."""
    argv, cwd, env = params.get("argv"), params.get("cwd"), params.get("env") or {}
    timeout, command = params.get("timeout"), params.get("command")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise TerminalError("the command to run is not a list of arguments")
    if not isinstance(cwd, str) or not isinstance(command, str) or not isinstance(env, dict):
        raise TerminalError("the command to run lacks its folder, its text or its environment")
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise TerminalError("the command to run has no timeout")
    return argv, cwd, {str(k): str(v) for k, v in env.items()}, float(timeout), command


def _problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "the answer"
    return f"{where}: {first.get('msg', 'invalid')}; got {str(first.get('input'))[:80]!r}"
