"""The seams of the agent core, as small protocols: concrete classes satisfy them structurally."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from agent.model import ModelReply
from agent.protocol import Event, Lesson, Lessons, Op, TurnFinished, UserInput
from agent.terminal import TerminalRun


class Model(Protocol):
    name: str

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_delta: Callable[[str], None] | None = None,
    ) -> ModelReply: ...


class FileChange(Protocol):
    """One file a turn changed (agent.workspace.FileChange)."""

    path: str
    kind: str
    before: str | None
    after: str | None
    new_path: str | None


class SessionClient(Protocol):
    """What a host (the command line, the demo, the language server, the terminal app) may ask of a
    session: agent.session.Session in this process and agent.remote.RemoteSession in a worker both
    provide it, and hosts are typed against it. Every request is an Op sent with `submit`, answered
    by the event it ended with; `run`, `interrupt` and `last_turn_changes` are its shorthands."""

    id: str

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call `callback` with every event from now on; the result unsubscribes."""
        ...

    async def submit(self, op: Op) -> Event | None:
        """Serve `op` (agent.protocol's Ops); its reply event, or None for an op that only steers."""
        ...

    async def run(self, op: UserInput) -> TurnFinished:
        """`submit` a turn's instruction; its TurnFinished."""
        ...

    def interrupt(self) -> None:
        """Submit an Interrupt without waiting: the running turn stops at its next step."""
        ...

    def last_turn_changes(self) -> Sequence[FileChange]:
        """Each file the last turn changed: its content at turn start and at turn end."""
        ...

    async def close(self) -> None: ...


class LessonSource(Protocol):
    """Where a session finds lessons: a short block for the system prompt at the start, and a few
    lessons from similar past failures to follow a failing tool result."""

    def session_block(
        self, workspace: str, model: str, budget_tokens: int, focus: str = "", *, repository: str | None = None
    ) -> Lessons: ...

    def for_failure(
        self,
        *,
        tool: str,
        error_kind: str | None,
        target: str | None,
        call: str,
        feedback: str,
        workspace: str,
        session_id: str,
        shown: frozenset[str],
        repository: str | None = None,
    ) -> Lessons: ...

    def known_failure(
        self, *, tool: str, target: str | None, workspace: str, repository: str | None = None
    ) -> Lesson | None: ...

    def close(self) -> None: ...


class CommandTerminal(Protocol):
    """A terminal where run_command runs its commands instead of a pipe of its own (an editor's, so
    that the user sees the output stream and can stop the command): `argv` is the whole command line,
    the sandbox's wrapper included. Raises agent.terminal.TerminalFailed when the terminal fails."""

    async def run(self, argv: list[str], cwd: Path, env: dict[str, str], timeout: float, command: str) -> TerminalRun:
        """Run `argv` (which runs the model's `command`) to its end or `timeout` seconds, then kill it."""
        ...
