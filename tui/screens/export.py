"""Export feedback pairs as training data: pick a format and a destination, watch the progress."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Button, Checkbox, Footer, Input, Label, ProgressBar, Select

from feedback_store.export.format_table import FORMATS

DEFAULT_FORMAT = "sdpo"


class ExportScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Back")]

    def __init__(self, store_path: Path, *, default_dir: Path | None = None) -> None:
        super().__init__(id="export")
        self.store_path = store_path
        self.default_dir = default_dir or Path.cwd()
        self.formats = list(FORMATS)

    def compose(self) -> ComposeResult:
        initial = DEFAULT_FORMAT if DEFAULT_FORMAT in self.formats else self.formats[0]
        yield Label(f"Export training data from {self.store_path}", classes="screen-title")
        with Vertical(id="export-form"):
            yield Label("Format")
            yield Select([(name, name) for name in self.formats], value=initial, allow_blank=False, id="export-format")
            yield Label("Destination file")
            yield Input(str(self._default_destination(initial)), id="export-path")
            with Horizontal(classes="row"):
                yield Checkbox("Redact secrets", value=True, id="export-redact")
                yield Checkbox("Include flagged sessions", value=False, id="export-flagged")
            with Horizontal(classes="row"):
                yield Button("Export", variant="primary", id="export-run")
                yield ProgressBar(total=1, id="export-progress", show_eta=False)
            yield Label("", id="export-result")
        yield Footer()

    def _default_destination(self, fmt: str) -> Path:
        return self.default_dir / f"teachback-{fmt}{FORMATS[fmt].suffix}"

    @on(Select.Changed, "#export-format")
    def _format_changed(self, event: Select.Changed) -> None:
        path_input = self.query_one("#export-path", Input)
        old_defaults = {str(self._default_destination(name)) for name in self.formats}
        if path_input.value in old_defaults:  # the user has not typed their own path: follow the format
            path_input.value = str(self._default_destination(str(event.value)))

    @on(Button.Pressed, "#export-run")
    @on(Input.Submitted, "#export-path")
    def _start(self) -> None:
        fmt = str(self.query_one("#export-format", Select).value)
        out_path = Path(self.query_one("#export-path", Input).value).expanduser()
        if not out_path.parent.is_dir():
            self.notify(f"{out_path.parent} does not exist; choose a folder that does.", severity="error")
            return
        self.query_one("#export-run", Button).disabled = True
        self.query_one(ProgressBar).update(total=None, progress=0)
        self.run_export(
            fmt,
            out_path,
            redact=self.query_one("#export-redact", Checkbox).value,
            include_flagged=self.query_one("#export-flagged", Checkbox).value,
        )

    @work(thread=True, exclusive=True, group="export")
    def run_export(self, fmt: str, out_path: Path, *, redact: bool, include_flagged: bool) -> None:
        from feedback_store import StoreError
        from feedback_store.export.export import export

        def progress(done: int, total: int) -> None:
            self.app.call_from_thread(self.query_one(ProgressBar).update, total=max(total, 1), progress=done)

        try:
            result = export(
                [self.store_path], fmt, out_path, progress=progress, redact=redact, include_flagged=include_flagged
            )
        except (StoreError, OSError) as exc:  # unreadable database, unwritable file, missing pyarrow
            self.app.call_from_thread(self._finished, f"Export failed: {exc}", error=True)
            return
        paths = ", ".join(str(p) for p in result.paths)
        summary = f"Exported {result.records} records ({result.redactions} redactions) to {paths}"
        self.app.call_from_thread(self._finished, summary, error=False)

    def _finished(self, summary: str, *, error: bool) -> None:
        self.query_one("#export-run", Button).disabled = False
        self.query_one("#export-result", Label).update(summary)
        bar = self.query_one(ProgressBar)
        if not error and bar.total is None:
            bar.update(total=1, progress=1)
        self.notify(summary, title="Export", severity="error" if error else "information", timeout=10)

    def action_close(self) -> None:
        self.dismiss(None)
