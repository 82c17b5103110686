"""A turn's limits, what it has spent against them, and the user's interrupt, a part the session
owns: each way out of the loop they decide is raised as its LoopExit (agent.exits)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

from agent.config import REPLY_TOKENS, Settings
from agent.exits import Interrupted, LimitExceeded, Refused

T = TypeVar("T")


class TurnLimits:
    """max_steps, max_cost and max_time for the turn under way, and a reply's own end (max_tokens,
    a refusal). `totals` is what the turn spent, as TurnFinished reports it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._interrupt = asyncio.Event()
        self.totals: dict[str, Any] = {}
        self.deadline = 0.0

    def start_turn(self) -> None:
        self._interrupt.clear()
        self.totals = {"steps": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
        self.deadline = time.monotonic() + self.settings.max_time

    def interrupt(self) -> None:
        self._interrupt.set()

    @property
    def interrupted(self) -> bool:
        return self._interrupt.is_set()

    def next_step(self) -> int:
        """The number of the step to take now, unless the user or a limit stops the turn first."""
        totals, settings = self.totals, self.settings
        if self._interrupt.is_set():
            raise Interrupted("Interrupted by the user.")
        if totals["steps"] >= settings.max_steps:
            raise LimitExceeded("max_steps", f"Stopped after {totals['steps']} steps (max_steps).")
        if settings.max_cost and totals["cost_usd"] >= settings.max_cost:
            raise LimitExceeded("max_cost", f"Stopped at ${totals['cost_usd']:.4f} (max_cost ${settings.max_cost}).")
        if time.monotonic() >= self.deadline:
            raise LimitExceeded("max_time", f"Stopped after {settings.max_time:g} s (max_time).")
        totals["steps"] += 1
        return totals["steps"]

    def spend(self, reply: Any) -> None:
        """Count a model reply's tokens and cost."""
        for spent in ("prompt_tokens", "completion_tokens", "cost_usd"):
            self.totals[spent] += getattr(reply, spent)

    def check_cut(self, finish_reason: str | None) -> None:
        """A reply without a call that the model did not end itself: cut at its token limit, or
        refused (the provider's content filter included)."""
        if finish_reason == "length":
            embedded = self.settings.model.startswith("local/")
            if self.settings.max_tokens:
                limit = f"max_tokens = {self.settings.max_tokens}"
            else:
                limit = f"the embedded model's cap of {REPLY_TOKENS} tokens" if embedded else "the provider's limit"
            loop = ", or went round in a loop of repeated text" if embedded else ""
            raise LimitExceeded(
                "max_tokens",
                f"Stopped: the model's reply reached its token limit ({limit}){loop} before it ended. Raise "
                "max_tokens (TEACHBACK_MAX_TOKENS), or ask for a smaller step.",
            )
        if finish_reason in ("content_filter", "refusal"):
            raise Refused("The model declined to answer.")

    async def interruptible(self, awaitable: Awaitable[T], deadline: float) -> T:
        """Await `awaitable` unless the user interrupts or the turn's time runs out first."""
        task = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(self._interrupt.wait())
        try:
            done, _ = await asyncio.wait(
                {task, stop}, timeout=max(0.0, deadline - time.monotonic()), return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stop.cancel()
        if task in done:
            return task.result()
        task.cancel()
        if stop in done:
            raise Interrupted("Interrupted by the user.")
        raise LimitExceeded("max_time", f"Stopped after {self.settings.max_time:g} s (max_time).")
