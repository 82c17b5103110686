"""Earlier sessions from the feedback store; Enter resumes one."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Label

from common.text import one_line
from tui.formatting import format_time
from tui.seams import FeedbackStore

SessionChoice = tuple[str, list[dict[str, Any]]]


class SessionsScreen(Screen[SessionChoice | None]):
    """Dismisses with (session id, its conversation) to resume, or None."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "resume", "Resume", priority=True),
        Binding("escape", "close", "Back"),
    ]

    def __init__(self, store: FeedbackStore) -> None:
        super().__init__(id="sessions")
        self.store = store

    def compose(self) -> ComposeResult:
        yield Label("Sessions — Enter resumes the highlighted one", classes="screen-title")
        yield DataTable(id="sessions-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("Started", "Instruction", "Model", "Turns", "Pairs")
        for row in self.store.list_sessions(limit=200):
            table.add_row(
                format_time(row.started_at),
                one_line(row.title or "(no instruction)", 40),
                one_line(row.model, 24),
                str(row.turns),
                str(row.pairs),
                key=row.id,
            )
        table.focus()
        if not table.row_count:
            self.notify("No sessions recorded yet.")

    def action_resume(self) -> None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return
        session_id = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        assert session_id is not None
        self.dismiss((session_id, self.store.conversation(session_id)))

    def action_close(self) -> None:
        self.dismiss(None)
