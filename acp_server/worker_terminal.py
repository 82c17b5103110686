"""The editor's terminal as the worker reaches it: the `CommandTerminal` commands run in
(agent.interfaces), asked of the ACP agent process (acp_server.terminals), which speaks `terminal/*` to
the editor. The call is bounded: the command's own timeout plus time for each of the editor's answers,
so an editor that never answers fails the call instead of holding the turn."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agent.session_server import ParentCallFailed, ParentCalls
from agent.terminal import TerminalFailed, TerminalRun

RUN = "terminal/run"  # the worker's call to the ACP agent process: one command, start to release
STEP_TIMEOUT = 30.0  # seconds the editor gets to answer one terminal/* request (create, output, kill, release)
STEPS = 4


class ClientTerminal:
    def __init__(self, calls: ParentCalls) -> None:
        self._calls = calls

    async def run(self, argv: list[str], cwd: Path, env: dict[str, str], timeout: float, command: str) -> TerminalRun:
        params = {"argv": argv, "cwd": str(cwd), "env": env, "timeout": timeout, "command": command}
        # ParentCalls blocks its thread until the answer; the event loop stays free to read that answer.
        try:
            answer = await asyncio.to_thread(self._calls.call, RUN, params, timeout + STEPS * STEP_TIMEOUT + 5)
        except ParentCallFailed as exc:
            raise TerminalFailed(str(exc)) from None
        return terminal_run(answer)


def terminal_run(answer: Any) -> TerminalRun:
    """The ACP agent's answer to RUN, checked (it comes from another process)."""
    if not isinstance(answer, dict):
        raise TerminalFailed(f"the answer to {RUN} is {type(answer).__name__}, not an object")
    output, code, signal = answer.get("output"), answer.get("exit_code"), answer.get("signal")
    if not isinstance(output, str):
        raise TerminalFailed(f"the answer to {RUN} holds no output text")
    if code is not None and (not isinstance(code, int) or isinstance(code, bool)):
        raise TerminalFailed(f"the answer to {RUN} holds an exit code that is no whole number: {code!r:.40}")
    return TerminalRun(
        output=output,
        exit_code=code,
        signal=signal if isinstance(signal, str) else None,
        timed_out=answer.get("timed_out") is True,
        truncated=answer.get("truncated") is True,
    )
