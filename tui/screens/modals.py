"""Small dialogs: approve or deny an action, and say why an edit is rejected."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.syntax import Syntax
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from agent.protocol import ApprovalRequested


@dataclass(frozen=True)
class Verdict:
    approved: bool
    comment: str | None = None


class ApprovalModal(ModalScreen[Verdict]):
    """The agent wants to run a command or apply an edit; the user decides."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "decide(True)", "Approve"),
        Binding("n", "decide(False)", "Deny"),
        Binding("escape", "decide(False)", "Deny", show=False),
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
            yield Input(placeholder="Reason if you deny (optional; Enter denies)", id="approval-comment")
            with Horizontal(classes="buttons"):
                yield Button("Approve [y]", variant="success", id="approve")
                yield Button("Deny [n]", variant="error", id="deny")

    def on_mount(self) -> None:
        self.query_one("#approve", Button).focus()

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
