"""The Textual application: owns the settings and the feedback store, and the screens' entry points."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from agent.config import Settings
from tui.screens.export import ExportScreen
from tui.screens.feedback import FeedbackScreen
from tui.screens.main import MainScreen
from tui.screens.sessions import SessionChoice, SessionsScreen
from tui.seams import FeedbackStore


class TeachbackApp(App[int]):
    main_screen: MainScreen  # the chat screen, made once the store is open

    TITLE = "teachback"
    CSS_PATH = "styles/app.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+o", "sessions", "Sessions"),
        Binding("ctrl+b", "feedback", "Feedback"),
        Binding("ctrl+s", "export", "Export"),
    ]

    def __init__(self, workspace: Path, settings: Settings, *, store_path: Path | None = None) -> None:
        super().__init__()
        self.workspace = workspace
        self.settings = settings
        self.store_path = Path(store_path) if store_path is not None else settings.db_path()
        self.store: FeedbackStore | None = None
        self.store_error: str | None = None

    def on_load(self) -> None:
        self.store = self._open_store()

    def get_default_screen(self) -> Screen:
        self.main_screen = MainScreen(self.workspace, self.settings, self.store)
        return self.main_screen

    def _open_store(self) -> FeedbackStore | None:
        from feedback_store import StoreError, open_store

        try:
            return open_store(self.store_path)
        except StoreError as exc:
            self.store_error = str(exc)
            return None

    def on_mount(self) -> None:
        if self.store_error:
            self.notify(
                f"Not recording feedback: {self.store_error}", title="Feedback store", severity="error", timeout=20
            )

    def require_store(self) -> FeedbackStore | None:
        if self.store is None:
            self.notify(
                f"The feedback store is unavailable: {self.store_error}", title="Feedback store", severity="error"
            )
        return self.store

    def action_sessions(self) -> None:
        store = self.require_store()
        if store is None or isinstance(self.screen, SessionsScreen):
            return

        def resume(choice: SessionChoice | None) -> None:
            if choice is not None:
                self.main_screen.switch_session(*choice)

        self.push_screen(SessionsScreen(store), resume)

    def action_feedback(self) -> None:
        store = self.require_store()
        if store is not None and not isinstance(self.screen, FeedbackScreen):
            self.push_screen(FeedbackScreen(store))

    def action_export(self) -> None:
        if not isinstance(self.screen, ExportScreen):
            self.push_screen(ExportScreen(self.store_path))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Sessions", "Resume an earlier session (ctrl+o)", self.action_sessions)
        yield SystemCommand("Feedback browser", "Browse feedback pairs and error stats (ctrl+b)", self.action_feedback)
        yield SystemCommand("Export training data", "Export feedback pairs to a file (ctrl+s)", self.action_export)
        if isinstance(screen, MainScreen):
            yield SystemCommand(
                "Review changes", "Accept or reject the last turn's edits (ctrl+r)", screen.action_review
            )
            yield SystemCommand(
                "Interrupt", "Stop the running turn after its current step (esc)", screen.action_interrupt
            )
            yield SystemCommand("New session", "Start a fresh session (ctrl+n)", screen.action_new_session)
            yield SystemCommand(
                "Plan mode", "Toggle plan mode: look and plan, no edits or commands (ctrl+t)", screen.action_toggle_plan
            )

    async def action_quit(self) -> None:
        await self.main_screen.close_session()
        self.exit(0)

    def on_unmount(self) -> None:
        if self.store is not None:
            self.store.close()
