"""Small dialogs: approve or deny an action, say why an edit is rejected, approve or send back a plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.syntax import Syntax
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.events import Key
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from agent.protocol import ApprovalRequested, PlanProposed, ReviewPlan

APPROVE_KEY, DENY_KEY = "ctrl+y", "ctrl+n"  # keys no reason can contain
APPROVAL_KEYS_HINT = f"{APPROVE_KEY} approves · {DENY_KEY}, Esc or Enter in the reason denies"
PLAN_KEYS_HINT = (
    f"{APPROVE_KEY} approves (edits then run without asking) · {DENY_KEY} or Enter in the reason sends it back · "
    "Esc keeps it waiting (a message in plan mode sends it back)"
)


@dataclass(frozen=True)
class Verdict:
    approved: bool
    comment: str | None = None


class ApprovalModal(ModalScreen[Verdict]):
    """The agent wants to run a command or apply an edit; the user decides.

    The reason line has the focus, and a printable key pressed anywhere else in the dialog is typed
    into it: a reason such as "yes it's wrong, don't" is text, never a verdict. Only keys that cannot
    be typed into a reason decide: ctrl+y approves; ctrl+n, Esc, or Enter in the reason line denies
    (with the reason); Enter on a focused button presses it.
    """

    # priority: the keys decide wherever the focus is, the reason line included.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(APPROVE_KEY, "decide(True)", "Approve", priority=True),
        Binding(DENY_KEY, "decide(False)", "Deny", priority=True),
        Binding("escape", "decide(False)", "Deny", show=False, priority=True),
    ]

    def __init__(self, request: ApprovalRequested) -> None:
        super().__init__()
        self.request = request

    def compose(self) -> ComposeResult:
        request = self.request
        with Vertical(classes="dialog", id="approval-dialog") as dialog:
            dialog.border_title = f"Approve {request.action}?"
            yield Label(Text(request.summary), id="approval-summary")
            with VerticalScroll(id="approval-detail"):
                if request.action == "edit":
                    yield Static(Syntax(request.detail, "diff", theme="ansi_dark", background_color="default"))
                else:
                    yield Static(Text(request.detail, style="bold"))
            # select_on_focus off: a key typed on a button comes back here and must add to the reason, not replace it.
            yield Input(placeholder="Reason if you deny (optional)", id="approval-comment", select_on_focus=False)
            yield Label(Text(APPROVAL_KEYS_HINT), id="approval-keys")
            with Horizontal(classes="buttons"):
                # Content, not markup: "[ctrl+y]" would be read as a markup tag and shown as nothing.
                yield Button(Content(f"Approve [{APPROVE_KEY}]"), variant="success", id="approve")
                yield Button(Content(f"Deny [{DENY_KEY}]"), variant="error", id="deny")

    def on_mount(self) -> None:
        self.query_one("#approval-comment", Input).focus()

    def on_key(self, event: Key) -> None:
        """A character typed while the focus is off the reason line goes into the reason line."""
        reason = self.query_one("#approval-comment", Input)
        if event.is_printable and self.focused is not reason:
            event.stop()
            event.prevent_default()
            reason.focus()
            reason.insert_text_at_cursor(event.character or "")

    def action_decide(self, approved: bool) -> None:
        comment = self.query_one("#approval-comment", Input).value.strip() or None
        self.dismiss(Verdict(approved, None if approved else comment))

    @on(Button.Pressed, "#approve")
    def _approve(self) -> None:
        self.action_decide(True)

    @on(Button.Pressed, "#deny")
    @on(Input.Submitted, "#approval-comment")
    def _deny(self) -> None:
        self.action_decide(False)


class ReasonModal(ModalScreen[str | None]):
    """Ask why an edit is rejected; the answer is the feedback the model learns from.

    Dismisses with the reason ("" when the user gives none), or None when the user cancels.
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="reason-dialog") as dialog:
            dialog.border_title = "Reject change"
            yield Label(Text(f"Why reject {self.path}? The file is restored and the reason recorded."))
            yield Input(placeholder="e.g. keep the public name; only fix the bug", id="reason")
            with Horizontal(classes="buttons"):
                yield Button("Reject", variant="error", id="reject")
                yield Button("Cancel", id="cancel")

    @on(Button.Pressed, "#reject")
    @on(Input.Submitted, "#reason")
    def _reject(self) -> None:
        self.dismiss(self.query_one("#reason", Input).value.strip())

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


class PlanModal(ModalScreen[ReviewPlan | None]):
    """A plan-mode turn ended with a plan: approve it (the session goes on in the chosen mode and
    implements it) or send it back with a reason (the agent plans again; the reason is recorded as
    feedback). Dismisses with the verdict, or None when the user leaves the plan waiting."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(APPROVE_KEY, "approve('auto-edit')", "Approve", priority=True),
        Binding(DENY_KEY, "send_back", "Send back", priority=True),
        Binding("escape", "dismiss(None)", "Later", show=False, priority=True),
    ]

    def __init__(self, plan: PlanProposed) -> None:
        super().__init__()
        self.plan = plan

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="plan-dialog") as dialog:
            dialog.border_title = "Approve the plan?"
            with VerticalScroll(id="plan-text"):
                yield Static(Text(self.plan.plan))
            yield Input(placeholder="Reason to send it back", id="plan-reason", select_on_focus=False)
            yield Label(Text(PLAN_KEYS_HINT), id="plan-keys")
            with Horizontal(classes="buttons"):
                yield Button(Content(f"Approve [{APPROVE_KEY}]"), variant="success", id="plan-approve")
                yield Button("Approve, ask before each edit", id="plan-approve-ask")
                yield Button(Content(f"Send back [{DENY_KEY}]"), variant="error", id="plan-send-back")

    def on_mount(self) -> None:
        self.query_one("#plan-reason", Input).focus()

    def action_approve(self, mode: str) -> None:
        self.dismiss(ReviewPlan(approved=True, mode=mode))

    @on(Button.Pressed, "#plan-send-back")
    @on(Input.Submitted, "#plan-reason")
    def action_send_back(self) -> None:
        reason = self.query_one("#plan-reason", Input).value.strip()
        if not reason:
            self.app.notify("Say why the plan goes back: the agent revises it by your reason.", severity="warning")
            self.query_one("#plan-reason", Input).focus()
            return
        self.dismiss(ReviewPlan(approved=False, comment=reason))

    @on(Button.Pressed, "#plan-approve")
    def _approve(self) -> None:
        self.action_approve("auto-edit")

    @on(Button.Pressed, "#plan-approve-ask")
    def _approve_asking(self) -> None:
        self.action_approve("ask")
