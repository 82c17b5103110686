"""The seams of the agent core, as small protocols: concrete classes satisfy them structurally."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from agent.model import ModelReply
from agent.protocol import Lessons


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
