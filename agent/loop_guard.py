"""Short loops of failing calls: a model that alternates `read_file X` and `list_files X` on a wrong
path gets the same two failures forever. When a call repeats one made two to four calls ago, and
every call since then failed with no edit applied, its result cannot differ: it is answered with
feedback instead of being run (the identical consecutive call is the repeated-call guard's)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agent.protocol import REPEAT_ERRORS
from agent.protocol.textcalls import call_object
from agent.toolkit import ToolResult, error

MIN_PERIOD, MAX_PERIOD = 2, 4
MAX_REPEATS = 3  # consecutive repeated calls or cycles, each answered with feedback, before the turn stops


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


class LoopGuard:
    """A turn's two loop guards, the repeated call of the previous step and the cycle of failures,
    and how many calls in a row they answered: after MAX_REPEATS the turn stops."""

    def __init__(self) -> None:
        # (name, canonical arguments) -> edits applied before it, for the previous and current step
        self._previous_calls: dict[tuple[str, str], int] = {}
        self._step_calls: dict[tuple[str, str], int] = {}
        self.edits = 0  # applied in the session so far
        self.cycles = CycleGuard()
        self._repeats = 0

    @classmethod
    def resumed(
        cls,
        previous_step: dict[tuple[str, str], int],
        turn_calls: list[tuple[tuple[str, str] | None, bool, int]],
        edits: int,
    ) -> LoopGuard:
        """The guards as they stood at a recorded step of a session, before its first call: the
        previous step's calls (each with the edits applied before it), this turn's calls so far
        (key, failed, edits before it) and the edits applied in the session."""
        guard = cls()
        guard._previous_calls = dict(previous_step)
        guard.edits = edits
        for key, failed, before in turn_calls:
            guard.cycles.note(key, failed, before)
        return guard

    def start_turn(self) -> None:
        self._step_calls = {}  # a new instruction may well need the same call again
        self.cycles.reset()
        self._repeats = 0

    def start_step(self) -> None:
        self._previous_calls, self._step_calls = self._step_calls, {}

    def edit_applied(self) -> None:
        self.edits += 1

    def check(self, name: str, kwargs: dict[str, Any], target: str | None) -> ToolResult | None:
        """The feedback that answers a call instead of running it, when its result cannot differ from
        the one the model already has; None: run it."""
        period = None if name == "finish" else self.cycles.period(call_key(name, kwargs), self.edits)
        if self.repeats_previous_step(name, kwargs):
            return error(
                repeat_feedback(name),
                "repeated_call",
                target=target,
            )
        if period is not None:
            return error(cycle_feedback(name, period), "repeated_cycle", target=target)
        return None

    def repeats_previous_step(self, name: str, kwargs: dict[str, Any]) -> bool:
        """A model stuck in a loop re-sends its last call; the second copy gets feedback instead."""
        key = call_key(name, kwargs)
        self._step_calls[key] = self.edits
        return name != "finish" and self._previous_calls.get(key) == self.edits

    def stuck(self, error_kind: str | None) -> str | None:
        """Count a call's result; when the guards answered MAX_REPEATS calls in a row, why the turn stops."""
        self._repeats = self._repeats + 1 if error_kind in REPEAT_ERRORS else 0
        if self._repeats < MAX_REPEATS:
            return None
        if error_kind == "repeated_cycle":
            return f"Stopped: the model went round the same failing calls {MAX_REPEATS} more times after being told."
        return f"Stopped: the model sent the same call {MAX_REPEATS + 1} times in a row."


def call_text(name: str, arguments: dict[str, Any]) -> str:
    """A call written out whole, as the one JSON object a model writes in the text and grammar tool
    modes (plain to read in the native one)."""
    return call_object(name, json.dumps(arguments, ensure_ascii=False))


def repeat_feedback(name: str) -> str:
    # The way out is written in full: a small model copies a call it is shown far more readily than
    # one it is told about (the embedded model, after this answer: 8 of 8 samples called finish with
    # the call written out, 0 of 6 when told "call finish").
    return (
        f"You made exactly this {name} call in your previous step and nothing has changed since, so its "
        "result (above) would be the same. Do not repeat it: use that result, make a different call, or, "
        f"if the task is done, call finish: {call_text('finish', {'summary': 'what you did'})}"
    )


def cycle_feedback(name: str, period: int) -> str:
    return (
        f"You are going round in a loop: this {name} call is the same as the one {period} calls ago, and "
        "every call since then failed with nothing changed, so it would fail the same way again. Do not "
        "repeat these calls: read their results above, then try another path or another tool, for "
        f"instance {call_text('list_files', {})} to see what exists, or call finish and say what blocks you."
    )
