"""Approvals for the headless command line: ask on the terminal, answer the session with an Op."""

from __future__ import annotations

import asyncio
import sys
from typing import TextIO

from agent.approval import UNANSWERED
from agent.protocol import ApprovalDecision, ApprovalRequested, Event, ReviewPlan

# What each answer to the plan prompt approves the plan to go on in.
PLAN_ANSWERS = {"a": "auto-edit", "s": "ask", "f": "full-auto"}
PLAN_QUESTION = "Approve the plan? [a] yes, auto-edit / [s] yes, ask before each edit / [f] yes, full-auto / [r] revise / [q] stop: "


class TerminalApprover:
    """Subscribes to a session; each ApprovalRequested is asked on the terminal (y/n, then an
    optional reason), reading answers from stdin (a pipe works too). At end of input the request is
    declined with a reason the model reads."""

    def __init__(self, session, stdin: TextIO = sys.stdin, stderr: TextIO = sys.stderr) -> None:
        self.session = session
        self.stdin = stdin
        self.stderr = stderr
        self._tasks: set[asyncio.Task] = set()
        session.subscribe(self)

    def __call__(self, event: Event) -> None:
        if isinstance(event, ApprovalRequested):
            task = asyncio.get_running_loop().create_task(self._answer(event))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _answer(self, event: ApprovalRequested) -> None:
        approved, comment = await asyncio.to_thread(self._ask, event)
        await self.session.submit(ApprovalDecision(request_id=event.request_id, approved=approved, comment=comment))

    def _ask(self, event: ApprovalRequested) -> tuple[bool, str | None]:
        self.stderr.write(f"Allow this {event.action}? [y/N] ")
        self.stderr.flush()
        line = self.stdin.readline()
        if not line:
            return False, UNANSWERED
        if line.strip().lower() in ("y", "yes"):
            return True, None
        self.stderr.write("Reason (optional, the agent will read it): ")
        self.stderr.flush()
        return False, self.stdin.readline().strip() or None


def ask_plan(stdin: TextIO = sys.stdin, stderr: TextIO = sys.stderr) -> ReviewPlan | None:
    """The user's verdict on the plan a plan-mode turn ended with, asked on the terminal (a pipe works
    too): approved in the mode they choose, or sent back with their reason. None: stop here (q, or
    the end of input), the plan left unreviewed."""
    while True:
        stderr.write(PLAN_QUESTION)
        stderr.flush()
        line = stdin.readline()
        answer = line.strip().lower()[:1]
        if not line or answer == "q":
            return None
        if answer in PLAN_ANSWERS:
            return ReviewPlan(approved=True, mode=PLAN_ANSWERS[answer])
        if answer == "r":
            stderr.write("Why does it go back? (the agent revises the plan by it): ")
            stderr.flush()
            reason = stdin.readline().strip()
            if reason:
                return ReviewPlan(approved=False, comment=reason)
