"""The seams of the agent core, as small protocols: concrete classes satisfy them structurally."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from agent.model import ModelReply
from agent.protocol import EditReviewed, Event, Lesson, Lessons, Op, TurnFinished, UserInput


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
    provide it, and hosts are typed against it."""

    id: str

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call `callback` with every event from now on; the result unsubscribes."""
        ...

    async def run(self, op: UserInput) -> TurnFinished: ...

    async def submit(self, op: Op) -> Any:
        """Send an op that is not a new turn (an approval, an interrupt)."""
        ...

    def interrupt(self) -> None: ...

    def last_turn_changes(self) -> Sequence[FileChange]: ...

    async def review_edit(self, edit_id: str, accepted: bool, comment: str | None = None) -> EditReviewed: ...

    async def review_file(self, path: str, accepted: bool, comment: str | None = None) -> EditReviewed: ...

    async def record_correction(self, path: str, user_content: str) -> EditReviewed | None: ...

    async def undo(self) -> list[str]: ...

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
