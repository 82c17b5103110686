"""What the terminal app needs from the feedback store (the session's side is
agent.interfaces.SessionClient).

`feedback_store.Store` satisfies these without inheriting from them; the app is typed against
these so that each screen states exactly what it uses.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol


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
