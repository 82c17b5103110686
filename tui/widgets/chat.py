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

    async def finish_assistant(self, text: str) -> None:
        """The model's step ended: show what it said if none of it streamed in (a non-streaming model,
        or a reply whose calls are written in its text)."""
        streamed = self._streaming is not None
        self._streaming = None
        if not streamed and text.strip():
            await self.add_assistant(text)

    async def add_notice(self, text: str, *, error: bool = False) -> None:
        self._streaming = None
        classes = "notice error" if error else "notice"
        await self.mount(Static(text, classes=classes, markup=False))

    async def replay(self, messages: list[dict[str, Any]], *, calls_in_text: bool = False) -> None:
        """Show a resumed conversation: its user instructions and assistant answers. `calls_in_text`:
        an assistant message's content is the model's raw reply, calls written in it (text and grammar
        tool modes), so a message that made calls is shown by them, in the tool log, not as an answer."""
        for message in messages:
            text = text_of(message)
            if message.get("role") == "user" and text:
                await self.add_user(text)
            elif message.get("role") == "assistant" and text.strip():
                if not (calls_in_text and message.get("tool_calls")):
                    await self.add_assistant(text)

    async def clear(self) -> None:
        self._streaming = None
        await self.remove_children()


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # OpenAI content parts
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""
