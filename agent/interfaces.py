"""The seams of the agent core, as small protocols: concrete classes satisfy them structurally."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from agent.model import ModelReply


class Model(Protocol):
    name: str

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_delta: Callable[[str], None] | None = None,
    ) -> ModelReply: ...
