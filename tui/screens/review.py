"""Review the files the last turn changed: accept or reject each (a rejection asks why)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Label, OptionList

from agent.protocol import ReviewFile
from agent.review import ReviewError
from tui.screens.modals import ReasonModal
from tui.widgets.diff_view import ChangeList, DiffView

if TYPE_CHECKING:  # annotations only: the app's first paint does not wait for the agent
    from agent.interfaces import FileChange, SessionClient


class ReviewScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "accept", "Accept file"),
        Binding("r", "reject", "Reject file"),
        Binding("A", "accept_all", "Accept all"),
        Binding("R", "reject_all", "Reject all"),
        Binding("escape", "close", "Done"),
    ]

    def __init__(
        self,
        session: SessionClient,
        changes: Sequence[FileChange],
        summary: str = "",
        verdicts: dict[str, str] | None = None,
    ) -> None:
        """`verdicts` (path -> accepted/rejected) carries the turn's earlier verdicts and receives new ones."""
        super().__init__(id="review")
        self.session = session
        self.changes = list(changes)
        self.summary = summary
        self.verdicts = {} if verdicts is None else verdicts

    def compose(self) -> ComposeResult:
        count = len(self.changes)
        yield Label(f"Review {count} changed file{'s' * (count != 1)}. {self.summary}".strip(), id="review-title")
        with Horizontal():
            yield ChangeList(self.changes, self.verdicts, id="changes")
            with VerticalScroll(id="diff-scroll"):
                yield DiffView(id="diff")
        yield Footer()

    def on_mount(self) -> None:
        changes = self.query_one(ChangeList)
        changes.focus()
        if self.changes:
            changes.highlighted = 0
            self.query_one(DiffView).show(self.changes[0])

    @on(OptionList.OptionHighlighted, "#changes")
    def _show(self, event: OptionList.OptionHighlighted) -> None:
        change = self.query_one(ChangeList).changes.get(event.option.id or "")
        if change is not None:
            self.query_one(DiffView).show(change)
            self.query_one("#diff-scroll").scroll_home(animate=False)

    def action_accept(self) -> None:
        path = self.query_one(ChangeList).current_path
        if path is not None:
            self._review([path], accepted=True, comment=None)

    def action_reject(self) -> None:
        path = self.query_one(ChangeList).current_path
        if path is not None:
            self._ask_and_reject([path], path)

    def action_accept_all(self) -> None:
        self._review(self._pending(), accepted=True, comment=None)

    def action_reject_all(self) -> None:
        pending = self._pending()
        if pending:
            self._ask_and_reject(pending, f"{len(pending)} files" if len(pending) > 1 else pending[0])

    def action_close(self) -> None:
        self.dismiss(None)

    def _ask_and_reject(self, paths: list[str], label: str) -> None:
        def rejected(reason: str | None) -> None:
            if reason is not None:
                self._review(paths, accepted=False, comment=reason or None)

        self.app.push_screen(ReasonModal(label), rejected)

    def _pending(self) -> list[str]:
        verdicts = self.query_one(ChangeList).verdicts
        return [path for path, verdict in verdicts.items() if verdict is None]

    @work(exclusive=False, group="review")
    async def _review(self, paths: list[str], *, accepted: bool, comment: str | None) -> None:
        changes = self.query_one(ChangeList)
        for path in paths:
            if changes.verdicts.get(path) is not None:
                self.notify(f"{path} is already {changes.verdicts[path]}.", severity="warning")
                continue
            try:
                await self.session.submit(ReviewFile(path=path, accepted=accepted, comment=comment))
            except (ReviewError, OSError) as exc:  # nothing left to review, or the file cannot be restored
                self.notify(f"Could not record the review of {path}: {exc}", severity="error", timeout=10)
                continue
            verdict = "accepted" if accepted else "rejected"
            changes.set_verdict(path, verdict)
            self.verdicts[path] = verdict
        if not self._pending():
            self.notify("All changes reviewed.")
            self.dismiss(None)
