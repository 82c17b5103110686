"""The seams of the agent core, as small protocols: concrete classes satisfy them structurally."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from agent.model import ModelReply
from agent.protocol import Event, Lessons


class Model(Protocol):
    name: str

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_delta: Callable[[str], None] | None = None,
    ) -> ModelReply: ...


class LessonSource(Protocol):
    """Where a session finds lessons: a short block for the system prompt at the start, and a few
    lessons from similar past failures to follow a failing tool result."""

    def session_block(self, workspace: str, model: str, budget_tokens: int, focus: str = "") -> Lessons: ...

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
    ) -> Lessons: ...

    def close(self) -> None: ...


class DemoFeedback(Protocol):
    """The database `teachback demo` records into (the CLI opens it): a subscriber per session, the
    feedback pairs recorded, and an export of them."""

    def recorder(self) -> Callable[[Event], None]: ...

    def pairs(self) -> list[Any]: ...

    def export(self, fmt: str, out: Path) -> tuple[int, list[Path], dict[str, int]] | None:
        """(records written, files, pairs left out by reason) of an export in `fmt` to `out`; None
        when there are no pairs."""
        ...

    def close(self) -> None: ...
