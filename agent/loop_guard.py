"""Short loops of failing calls: a model that alternates `read_file X` and `list_files X` on a wrong
path gets the same two failures forever. When a call repeats one made two to four calls ago, and
every call since then failed with no edit applied, its result cannot differ: it is answered with
feedback instead of being run (the identical consecutive call is the repeated-call guard's)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MIN_PERIOD, MAX_PERIOD = 2, 4


def call_key(name: str, kwargs: dict[str, Any]) -> tuple[str, str]:
    """A call's identity: its tool and canonical arguments."""
    return name, json.dumps(kwargs, sort_keys=True)


@dataclass(frozen=True)
class _Call:
    key: tuple[str, str] | None  # None: a call whose arguments did not parse
    failed: bool
    edits: int  # edits applied in the session before this call ran


class CycleGuard:
    """The last few calls of a turn, to tell when the next one closes a cycle of failures."""

    def __init__(self) -> None:
        self._calls: list[_Call] = []

    def reset(self) -> None:
        self._calls.clear()

    def period(self, key: tuple[str, str], edits: int) -> int | None:
        """The cycle length this call would close (2..4), or None when it may give something new."""
        for period in range(MIN_PERIOD, MAX_PERIOD + 1):
            window = self._calls[-period:]
            if len(window) < period or window[0].key != key:
                continue
            if all(c.failed and c.edits == edits for c in window) and any(c.key != key for c in window):
                return period
        return None

    def note(self, key: tuple[str, str] | None, failed: bool, edits: int) -> None:
        self._calls = [*self._calls[-(MAX_PERIOD - 1) :], _Call(key, failed, edits)]


def cycle_feedback(name: str, period: int) -> str:
    return (
        f"You are going round in a loop: this {name} call is the same as the one {period} calls ago, and "
        "every call since then failed with nothing changed, so it would fail the same way again. Do not "
        "repeat these calls: read their results above, then try another path or another tool "
        "(list_files with no path shows what exists), or call finish and say what blocks you."
    )
