"""How control leaves the session loop: each exit carries the TurnFinished reason and summary.

Nothing else in the agent uses exceptions for control flow.
"""

from __future__ import annotations


class LoopExit(Exception):
    """Leaves the loop; `reason` is the TurnFinished reason."""

    reason = "finished"

    def __init__(self, summary: str = "") -> None:
        super().__init__(summary)
        self.summary = summary


class Finished(LoopExit):
    reason = "finished"


class Answered(LoopExit):
    reason = "answered"


class LimitExceeded(LoopExit):
    def __init__(self, reason: str, summary: str) -> None:
        super().__init__(summary)
        self.reason = reason


class Refused(LoopExit):
    reason = "refusal"


class Blocked(LoopExit):
    """A hook blocked the prompt or stopped the turn (`continue: false`)."""

    reason = "blocked"


class Interrupted(LoopExit):
    reason = "interrupted"


class ModelFailed(LoopExit):
    reason = "error"
