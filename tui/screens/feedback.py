"""The feedback browser: pairs in the store with filters, one pair in detail, and error stats."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Label, Select, Static

from common.text import one_line
from tui.formatting import format_time, message_text
from tui.seams import FeedbackStore, Pair
from tui.widgets.stats_panel import StatsPanel

SOURCES = ("tool", "schema", "lint", "test", "user", "hook", "monitor")
CONTEXT_TAIL = 4


class FeedbackScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_pair", "Open pair", priority=True),
        Binding("ctrl+l", "clear_filters", "Clear filters"),
        Binding("escape", "close", "Back"),
    ]

    def __init__(self, store: FeedbackStore) -> None:
        super().__init__(id="feedback")
        self.store = store
        self.shown: dict[str, Pair] = {}

    def compose(self) -> ComposeResult:
        yield Label("Feedback pairs", classes="screen-title", id="feedback-title")
        with Horizontal(id="filters"):
            yield Select([(s, s) for s in SOURCES], prompt="any source", id="filter-source")
            yield Input(placeholder="tool", id="filter-tool")
            yield Input(placeholder="model", id="filter-model")
            yield Input(placeholder="since YYYY-MM-DD", id="filter-since")
        with Horizontal(id="feedback-body"):
            with Vertical(id="pairs-pane"):
                yield DataTable(id="pairs-table", cursor_type="row", zebra_stripes=True)
                yield Static(id="pair-preview")
            yield StatsPanel(id="stats")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("When", "Source", "Tool", "Kind")
        self.query_one(StatsPanel).show(self.store.stats())
        self.refresh_pairs()
        table.focus()

    def filters(self) -> dict[str, Any]:
        source = self.query_one("#filter-source", Select).value
        since_text = self.query_one("#filter-since", Input).value.strip()
        return {
            "source": None if source is Select.NULL else str(source),
            "tool": self.query_one("#filter-tool", Input).value.strip() or None,
            "model": self.query_one("#filter-model", Input).value.strip() or None,
            "since": _parse_date(since_text) if since_text else None,
        }

    def refresh_pairs(self) -> None:
        try:
            filters = self.filters()
        except ValueError as exc:
            self.notify(str(exc), severity="error")
            return
        pairs = list(self.store.pairs(**filters))
        table = self.query_one(DataTable)
        table.clear()
        self.shown = {pair.id: pair for pair in pairs}
        for pair in pairs:
            table.add_row(
                format_time(pair.created_at)[5:],
                pair.source,
                pair.tool or "",
                pair.error_kind or "",
                key=pair.id,
            )
        if not pairs:
            self.query_one("#pair-preview", Static).update(Text("No pairs match.", style="dim"))
        active = sum(1 for value in filters.values() if value is not None)
        label = f"Feedback pairs: {len(pairs)}" + (f" (filtered by {active})" if active else "")
        self.query_one("#feedback-title", Label).update(label)

    @on(DataTable.RowHighlighted, "#pairs-table")
    def _preview(self, event: DataTable.RowHighlighted) -> None:
        pair = self.shown.get(event.row_key.value or "")
        if pair is not None:
            self.query_one("#pair-preview", Static).update(Text(one_line(pair.feedback, 300)))

    @on(Select.Changed, "#filter-source")
    @on(Input.Submitted, "#filters Input")
    def _filter(self) -> None:
        self.refresh_pairs()

    def action_clear_filters(self) -> None:
        self.query_one("#filter-source", Select).clear()
        for field in self.query("#filters Input").results(Input):
            field.value = ""
        self.refresh_pairs()

    def action_open_pair(self) -> None:
        if isinstance(self.focused, Input):
            self.refresh_pairs()
            return
        table = self.query_one(DataTable)
        if not table.row_count:
            return
        pair_id = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        self.app.push_screen(PairScreen(self.shown[pair_id or ""]))

    def action_close(self) -> None:
        self.dismiss(None)


class PairScreen(Screen[None]):
    """One pair: the end of the context the model saw, its failed call, the feedback, the correction."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Back")]

    def __init__(self, pair: Pair) -> None:
        super().__init__(id="pair")
        self.pair = pair

    def compose(self) -> ComposeResult:
        pair = self.pair
        where = " · ".join(x for x in (pair.source, pair.tool, pair.error_kind, pair.model) if x)
        yield Label(f"Pair {pair.id[:12]} · {where} · {format_time(pair.created_at)}", classes="screen-title")
        with VerticalScroll(id="pair-detail"):
            tail = pair.prompt[-CONTEXT_TAIL:]
            yield Static(f"Context (last {len(tail)} of {len(pair.prompt)} messages)", classes="detail-heading")
            for message in tail:
                yield Static(_message(message))
            yield Static("Failed call", classes="detail-heading error")
            yield Static(_message(pair.completion))
            yield Static("Feedback", classes="detail-heading error")
            yield Static(Text(pair.feedback))
            yield Static("Correction", classes="detail-heading")
            yield Static(_message(pair.correction) if pair.correction else Text("none yet", style="dim italic"))
        yield Footer()

    def action_close(self) -> None:
        self.dismiss(None)


def _message(message: dict[str, Any]) -> Text:
    text = Text()
    text.append(f"{message.get('role', '?')}: ", style="bold")
    body = message_text(message)
    text.append(body if len(body) <= 2000 else body[:2000] + " …")
    return text


def _parse_date(text: str) -> float:
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise ValueError(f"'{text}' is not a date; write it as YYYY-MM-DD.") from None
