"""Session events into Textual messages, with assistant text deltas coalesced.

A session calls its subscribers synchronously, possibly from a worker thread, and a model can
stream hundreds of deltas a second. `EventRelay` hops every event onto the app's event loop,
keeps their order, and merges the deltas that arrive within one frame into one message.
"""

from __future__ import annotations

import asyncio

from textual.message import Message
from textual.message_pump import MessagePump

from agent.protocol import AssistantDelta, Event

FRAME_SECONDS = 1 / 30


class SessionEvent(Message):
    """One event from the agent session (anything but text deltas)."""

    def __init__(self, event: Event) -> None:
        super().__init__()
        self.event = event


class AssistantText(Message):
    """Assistant text that streamed in since the previous `AssistantText`."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class EventRelay:
    """A session subscriber that posts `SessionEvent` / `AssistantText` messages to `target`."""

    def __init__(self, target: MessagePump, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._target = target
        self._loop = loop or asyncio.get_running_loop()
        self._pending: list[str] = []
        self._flush_handle: asyncio.TimerHandle | None = None

    def __call__(self, event: Event) -> None:
        self._loop.call_soon_threadsafe(self._receive, event)

    def _receive(self, event: Event) -> None:
        if isinstance(event, AssistantDelta):
            self._pending.append(event.text)
            if self._flush_handle is None:
                self._flush_handle = self._loop.call_later(FRAME_SECONDS, self.flush)
            return
        self.flush()
        self._target.post_message(SessionEvent(event))

    def flush(self) -> None:
        """Post the text gathered so far (if any) now."""
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if self._pending:
            text = "".join(self._pending)
            self._pending.clear()
            self._target.post_message(AssistantText(text))
