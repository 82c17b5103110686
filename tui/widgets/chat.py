"""The conversation: the user's instructions and the assistant's answers, streamed as markdown."""

from __future__ import annotations

from typing import Any

from textual.containers import VerticalScroll
from textual.widgets import Markdown, Static


class ChatView(VerticalScroll):
    """A scrolling transcript; the newest assistant answer grows as its text streams in."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._streaming: Markdown | None = None

    def on_mount(self) -> None:
        self.anchor()

    async def add_user(self, text: str) -> None:
        self._streaming = None
        await self.mount(Static(text, classes="user-message", markup=False))

    async def add_assistant(self, text: str) -> None:
        self._streaming = None
        await self.mount(Markdown(text, classes="assistant-message"))

    async def append_assistant(self, text: str) -> None:
        """Append streamed text to the answer being written (starting one if needed)."""
        if self._streaming is None:
            self._streaming = Markdown("", classes="assistant-message")
            await self.mount(self._streaming)
        await self._streaming.append(text)

    async def finish_assistant(self, message: dict[str, Any]) -> None:
        """The model's step ended: show its text if none streamed (a non-streaming model)."""
        streamed = self._streaming is not None
        self._streaming = None
        content = _text_of(message)
        if not streamed and content.strip():
            await self.add_assistant(content)

    async def add_notice(self, text: str, *, error: bool = False) -> None:
        self._streaming = None
        classes = "notice error" if error else "notice"
        await self.mount(Static(text, classes=classes, markup=False))

    async def replay(self, messages: list[dict[str, Any]]) -> None:
        """Show a resumed conversation: its user instructions and assistant answers."""
        for message in messages:
            text = _text_of(message)
            if message.get("role") == "user" and text:
                await self.add_user(text)
            elif message.get("role") == "assistant" and text.strip():
                await self.add_assistant(text)

    async def clear(self) -> None:
        self._streaming = None
        await self.remove_children()


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # OpenAI content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""
