"""The chat screen: instruction line, streamed answers, tool log, status bar."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer

from agent.config import ConfigError, Settings
from agent.model import resolved_tool_mode
from agent.protocol import (
    ApprovalDecision,
    ApprovalRequested,
    AssistantMessage,
    EditApplied,
    ErrorEvent,
    LessonsShown,
    ModeChanged,
    ModelUsage,
    Op,
    PlanProposed,
    SessionStarted,
    SetMode,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
    UserInput,
)
from agent.workspace import WorkspaceError
from tui.relay import AssistantText, SessionEvent
from tui.screens.modals import ApprovalModal, PlanModal, Verdict
from tui.screens.review import ReviewScreen
from tui.seams import FeedbackStore
from tui.session_host import SessionHost
from tui.widgets.chat import ChatView, text_of
from tui.widgets.instruction import InstructionInput
from tui.widgets.status_bar import StatusBar
from tui.widgets.tool_log import ToolLog

log = logging.getLogger(__name__)

QUIET_REASONS = ("finished", "answered")


class MainScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "interrupt", "Interrupt", priority=True),
        Binding("ctrl+r", "review", "Review"),
        Binding("ctrl+n", "new_session", "New session", show=False),
        Binding("ctrl+t", "toggle_plan", "Plan mode", show=False),
    ]

    def __init__(self, workspace: Path, settings: Settings, store: FeedbackStore | None) -> None:
        super().__init__(id="main")
        self.settings = settings
        self.host = SessionHost(self, workspace, settings, store)
        self.turn_running = False
        self.turn_summary = ""
        self.turn_verdicts: dict[str, str] = {}  # the user's review of the last turn, by path
        # The mode plan mode hands back to when it is toggled off without a plan approved.
        self.mode_before_plan = settings.approval if settings.approval != "plan" else "ask"
        # Text and grammar tool modes: the model writes its calls in its reply, so what streams in is
        # not the answer; the chat shows the reply's words once parsed (AssistantMessage.text).
        self.calls_in_text = resolved_tool_mode(settings.model, settings.tool_mode) != "native"

    def compose(self) -> ComposeResult:
        with Horizontal(id="panes"):
            yield ChatView(id="chat")
            yield ToolLog(id="tools")
        yield InstructionInput(id="instruction")
        yield StatusBar(id="status")
        yield Footer()

    def on_mount(self) -> None:
        status = self.query_one(StatusBar)
        status.model = self.settings.model
        status.approval = self.settings.approval
        self.query_one("#chat").border_title = "Chat"
        self.query_one("#tools").border_title = "Tool calls"
        self.query_one(InstructionInput).focus()
        self.open_session()

    # -- session lifecycle -------------------------------------------------------------------

    @work(exclusive=True, group="session")
    async def open_session(self, session_id: str | None = None, history: list[dict[str, Any]] | None = None) -> None:
        status = self.query_one(StatusBar)
        status.state = "starting"
        try:
            await self.host.open(session_id, history)
        except (ConfigError, WorkspaceError, OSError) as exc:
            status.state = "no session"
            await self.report_error(f"Could not start the agent: {exc}")
            return
        status.state = "ready"
        status.step, status.tokens, status.cost = 0, 0, 0.0
        chat, tools = self.query_one(ChatView), self.query_one(ToolLog)
        await chat.clear()
        await tools.clear()
        if history:
            await chat.replay(history, calls_in_text=self.calls_in_text)
            await chat.add_notice(f"Resumed session {session_id}.")
        self.check_setup()

    @work(exclusive=True, group="setup")
    async def check_setup(self) -> None:
        """Warn in the chat about what `teachback doctor` would report (a model's missing key), before
        the first turn fails on it. Off the event loop: a litellm model's check imports litellm."""
        from agent.llm import load_litellm
        from agent.startup_checks import startup_problems

        # The first model call imports litellm on the event loop, where its seconds would freeze the
        # app and its clock: import it now, in a thread, while the user types.
        try:
            await asyncio.to_thread(load_litellm)
            problems = await asyncio.to_thread(startup_problems, self.host.workspace, self.settings)
        except Exception as exc:  # a check that cannot run must not take the app down; the turn will say more
            log.exception("the start-up check failed")
            problems = [f"the start-up check could not run: {exc!r}"]
        for problem in problems:
            await self.report_error(f"Set-up problem: {problem} (`teachback doctor` runs every check)")

    async def report_error(self, message: str) -> None:
        """An error kept in the chat, and shown as a notification too."""
        await self.query_one(ChatView).add_notice(message, error=True)
        self.app.notify(message, title="Agent", severity="error", timeout=15)

    def switch_session(self, session_id: str | None = None, history: list[dict[str, Any]] | None = None) -> None:
        """Start a fresh session, or resume `session_id` with its recorded conversation."""
        if self.turn_running:
            self.app.notify("Wait for the turn to finish (Esc interrupts it).", severity="warning")
            return
        self.open_session(session_id, history)

    def action_new_session(self) -> None:
        self.switch_session()

    async def close_session(self) -> None:
        await self.host.close()

    # -- turns -------------------------------------------------------------------------------

    @on(InstructionInput.Sent)
    async def _send(self, event: InstructionInput.Sent) -> None:
        session = self.host.session
        if session is None:
            self.app.notify("The agent is not ready yet.", severity="warning")
            return
        if self.turn_running:
            self.app.notify("A turn is running; Esc interrupts it.", severity="warning")
            return
        await self.query_one(ChatView).add_user(event.text)
        self.run_turn(UserInput(text=event.text))

    @work(exclusive=True, group="turn")
    async def run_turn(self, op: Op) -> None:
        """A turn: the user's instruction, or the one a plan's verdict starts."""
        session = self.host.session
        assert session is not None  # _send checked it
        self.turn_running = True
        self.turn_verdicts = {}
        self.query_one(StatusBar).start_turn()
        try:
            await session.submit(op)  # its TurnFinished opens the review (_turn_finished)
        except Exception as exc:  # the session reports failures as events; this is the backstop
            log.exception("turn failed")
            await self.report_error(f"The turn failed: {exc}")
        finally:
            self.turn_running = False  # also when the app closes mid-turn and cancels this worker
        self.query_one(StatusBar).end_turn()
        if self.host.relay is not None:
            self.host.relay.flush()

    def action_interrupt(self) -> None:
        session = self.host.session
        if session is None or not self.turn_running:
            return
        session.interrupt()
        self.query_one(StatusBar).state = "interrupting"
        self.app.notify("Interrupting: the agent stops after the current step.")

    @work(group="mode")
    async def action_toggle_plan(self) -> None:
        """Plan mode on (edits and commands refused, each turn ends with a plan) or back off."""
        session = self.host.session
        if session is None or self.turn_running:
            self.app.notify("Switch modes between turns.", severity="warning")
            return
        current = self.query_one(StatusBar).approval
        if current != "plan":
            self.mode_before_plan = current
        await session.submit(SetMode(mode="plan" if current != "plan" else self.mode_before_plan))

    def action_review(self) -> None:
        session = self.host.session
        changes = session.last_turn_changes() if session else []
        if session is None or not changes:
            self.app.notify("The last turn changed no files.")
            return
        self.app.push_screen(ReviewScreen(session, changes, self.turn_summary, self.turn_verdicts))

    # -- events ------------------------------------------------------------------------------

    @on(AssistantText)
    async def _assistant_text(self, message: AssistantText) -> None:
        self.query_one(StatusBar).streamed(message.text)
        if not self.calls_in_text:
            await self.query_one(ChatView).append_assistant(message.text)

    @on(SessionEvent)
    async def _session_event(self, message: SessionEvent) -> None:
        event = message.event
        status = self.query_one(StatusBar)
        status.follow(event)
        if isinstance(event, SessionStarted):
            status.model = event.model
        elif isinstance(event, TurnStarted):
            status.step = 0
        elif isinstance(event, AssistantMessage):
            await self.query_one(ChatView).finish_assistant(
                event.text if event.text is not None else text_of(event.message)
            )
        elif isinstance(event, ModelUsage):
            status.add_usage(event.step, event.prompt_tokens + event.completion_tokens, event.cost_usd)
        elif isinstance(event, ToolCallStarted):
            await self.query_one(ToolLog).started(event)
        elif isinstance(event, ToolCallFinished):
            await self.query_one(ToolLog).finished(event)
        elif isinstance(event, EditApplied):
            self.query_one(ToolLog).edit_applied(event)
        elif isinstance(event, LessonsShown):
            await self.query_one(ToolLog).lessons_shown(event)
        elif isinstance(event, ApprovalRequested):
            self.app.push_screen(ApprovalModal(event), lambda verdict: self._decide(event, verdict))
        elif isinstance(event, TurnFinished):
            await self._turn_finished(event)
        elif isinstance(event, ModeChanged):
            status.approval = event.mode
            await self.query_one(ChatView).add_notice(f"Approval mode: {event.mode}.")
        elif isinstance(event, PlanProposed):
            self.app.push_screen(PlanModal(event), self._plan_verdict)
        elif isinstance(event, ErrorEvent):
            await self.report_error(event.message)

    async def _turn_finished(self, event: TurnFinished) -> None:
        if isinstance(self.app.screen, ApprovalModal):  # the turn ended (interrupted) while asking
            self.app.pop_screen()
        text = f"Turn {event.turn}: {event.reason} after {event.steps} step{'s' * (event.steps != 1)}"
        if event.reason == "error":  # the ErrorEvent before it is in the chat already, with the reason
            self.app.notify(text, title="Turn stopped", severity="error")
        elif event.reason not in QUIET_REASONS:
            text = f"{text}. {event.summary}".strip()
            self.app.notify(text, title="Turn stopped", severity="warning")
        await self.query_one(ChatView).add_notice(text, error=event.reason == "error")
        # Here, not when the turn's worker returns: the events before this one are all shown by now.
        self.turn_summary = event.summary
        session = self.host.session
        if session is not None and session.id == event.session_id and session.last_turn_changes():
            self.action_review()

    def _plan_verdict(self, verdict: Op | None) -> None:
        if verdict is None:
            self.app.notify("The plan waits: approve it with a mode switch (ctrl+t), or send it back with a message.")
        elif self.host.session is not None:
            self.run_turn(verdict)

    @work(group="approval")
    async def _decide(self, request: ApprovalRequested, verdict: Verdict | None) -> None:
        verdict = verdict or Verdict(approved=False)
        session = self.host.session
        if session is None or session.id != request.session_id:
            return
        try:
            await session.submit(
                ApprovalDecision(request_id=request.request_id, approved=verdict.approved, comment=verdict.comment)
            )
        except KeyError:  # the turn ended (interrupted, timed out) before the user answered
            self.app.notify("That request had already lapsed; nothing was run.", severity="warning")
