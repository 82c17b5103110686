"""Plan mode, a part the session owns: what the model is told in a plan-mode turn, the plan a turn
ends with (its final answer, or `finish`'s summary), and the user's verdict on it.

What plan mode refuses is refused by the approval policy where each call is judged (agent.approval,
agent.call_path), never by this note alone: the note only saves the model the refused calls."""

from __future__ import annotations

from collections.abc import Callable

from agent.config import APPROVAL_MODES
from agent.protocol import Event, PlanProposed, PlanReviewed, ReviewPlan

PLAN = "plan"
# Appended to the user's message in a plan-mode turn (recorded as sent: it is what the model saw).
PLAN_NOTE = (
    "\n\n[Plan mode: edits, file deletions and moves, and commands are refused. Read and search what you "
    "need, then reply with your plan as your final answer, without a tool call: the steps, the files and "
    "the changes. The user approves it or sends it back.]"
)
IMPLEMENT = "The plan is approved. Implement it now."
REVISE = "The plan is sent back. Revise it. The user's reason: {reason}"
FINISHED = "Finished: "  # how agent.tools.meta.finish's result begins


class PlanError(ValueError):
    """A plan verdict that cannot be served; the message says what to send instead."""


class Planning:
    """The plan waiting for the user's verdict, if any, and the events that record it."""

    def __init__(self, session_id: str, emit: Callable[[Event], Event]) -> None:
        self.session_id = session_id
        self.emit = emit
        self.pending: PlanProposed | None = None

    def turn_text(self, text: str, mode: str) -> str:
        return text + PLAN_NOTE if mode == PLAN else text

    def turn_starting(self, text: str, mode: str) -> None:
        """A new turn: a message sent in plan mode while a plan waits sends that plan back, the
        message being the reason; in another mode the plan is no longer waited on."""
        if self.pending is not None and mode == PLAN:
            self.reviewed(False, text, PLAN)
        self.pending = None

    def turn_ended(self, reason: str, summary: str, turn: int, mode: str, message_id: str | None) -> None:
        """A plan-mode turn that ended with an answer proposes it as the plan."""
        plan = summary.removeprefix(FINISHED).strip() if reason == "finished" else summary.strip()
        if mode != PLAN or reason not in ("answered", "finished") or not plan:
            return
        self.pending = self.emit(  # type: ignore[assignment]
            PlanProposed(session_id=self.session_id, cause_id=message_id, plan=plan, turn=turn, message_id=message_id)
        )

    def reviewed(self, approved: bool, comment: str | None, mode: str) -> None:
        if self.pending is None:
            return
        plan, self.pending = self.pending, None
        self.emit(
            PlanReviewed(
                session_id=self.session_id,
                cause_id=plan.id,
                plan_id=plan.id,
                approved=approved,
                mode=mode,
                comment=comment,
            )
        )

    def verdict(self, op: ReviewPlan) -> tuple[str, str]:
        """The mode a verdict continues in and the instruction of the turn it starts; the verdict
        is recorded."""
        if self.pending is None:
            raise PlanError("no plan is waiting for review: run a turn in plan mode first")
        reason = (op.comment or "").strip()
        if not op.approved:
            if not reason:
                raise PlanError("say why the plan goes back: the reason is what the agent revises it by")
            self.reviewed(False, reason, PLAN)
            return PLAN, REVISE.format(reason=reason)
        if op.mode not in APPROVAL_MODES or op.mode == PLAN:
            choices = ", ".join(m for m in APPROVAL_MODES if m != PLAN)
            raise PlanError(f"an approved plan goes on in one of {choices}, not {op.mode!r}")
        self.reviewed(True, reason or None, op.mode)
        return op.mode, IMPLEMENT + (f" {reason}" if reason else "")
