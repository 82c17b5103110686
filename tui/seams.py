"""What the terminal app needs from a session and from the feedback store.

`agent.runtime.Session` and `feedback_store.Store` satisfy these without inheriting from them; the
app is typed against these so that each screen states exactly what it uses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from agent.protocol import Event, Op, TurnFinished, UserInput


class FileChange(Protocol):
    path: str
    kind: str
    before: str | None
    after: str | None
    new_path: str | None


class AgentSession(Protocol):
    id: str

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]: ...

    async def run(self, op: UserInput) -> TurnFinished: ...

    async def submit(self, op: Op) -> Any: ...

    def interrupt(self) -> None: ...

    def last_turn_changes(self) -> Sequence[FileChange]: ...

    async def review_file(self, path: str, accepted: bool, comment: str | None = None) -> Any: ...


class Pair(Protocol):
    id: str
    session_id: str
    source: str
    tool: str | None
    error_kind: str | None
    feedback: str
    prompt: list[dict[str, Any]]
    completion: dict[str, Any]
    correction: dict[str, Any] | None
    model: str | None
    created_at: Any


class FeedbackStore(Protocol):
    def list_sessions(self, limit: int = 50) -> Iterable[Any]: ...

    def conversation(self, session_id: str) -> list[dict[str, Any]]: ...

    def pairs(
        self,
        source: str | None = None,
        tool: str | None = None,
        model: str | None = None,
        since: Any = None,
    ) -> Iterable[Pair]: ...

    def stats(self) -> dict[str, Any]: ...

    def close(self) -> None: ...
