"""The instruction line: Enter sends, Up/Down walk through earlier instructions."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Input


class InstructionInput(Input):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "history(-1)", "Previous", show=False),
        Binding("down", "history(1)", "Next", show=False),
    ]

    class Sent(Message):
        """The user sent an instruction (not blank)."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(placeholder="Tell the agent what to do (Enter to send)", id=id)
        self.history: list[str] = []
        self._cursor = 0  # len(history) means "the line being written"
        self._draft = ""

    @on(Input.Submitted)
    def _send(self, event: Input.Submitted) -> None:
        event.stop()
        text = self.value.strip()
        if not text:
            return
        if not self.history or self.history[-1] != text:
            self.history.append(text)
        self._cursor = len(self.history)
        self._draft = ""
        self.value = ""
        self.post_message(self.Sent(text))

    def action_history(self, delta: int) -> None:
        if not self.history:
            return
        if self._cursor == len(self.history):
            self._draft = self.value
        self._cursor = max(0, min(len(self.history), self._cursor + delta))
        self.value = self._draft if self._cursor == len(self.history) else self.history[self._cursor]
        self.cursor_position = len(self.value)
