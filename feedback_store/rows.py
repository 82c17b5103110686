"""What the store hands back: plain frozen records, readable as attributes or by key."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


class _Keyed:
    def __getitem__(self, key: str) -> Any:
        try:
            return getattr(self, key)
        except AttributeError:
            raise KeyError(key) from None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]


@dataclass(frozen=True)
class SessionSummary(_Keyed):
    id: str
    workspace: str | None
    model: str | None
    frontend: str | None
    started_at: float | None
    title: str | None
    turns: int
    pairs: int
    flagged: bool
    updated_at: float | None = None  # the time of its last recorded event


@dataclass(frozen=True)
class Pair(_Keyed):
    """One failure linked to its feedback and, when one exists, its correction.

    `prompt` is every message the model saw before the failed assistant message (system first),
    `completion` that message as sent, `correction` the later assistant message that fixed it (for
    `user` pairs, an assistant message holding the user's version of the file) or None.
    """

    id: str
    session_id: str
    source: str  # schema | tool | lint | test | user | monitor
    tool: str | None
    error_kind: str | None
    target: str | None
    feedback: str
    prompt: list[dict[str, Any]]
    completion: dict[str, Any]
    correction: dict[str, Any] | None
    tools: list[dict[str, Any]]
    model: str | None
    created_at: float
    corrected_at: float | None
    flagged: bool
