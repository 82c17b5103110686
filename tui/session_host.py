"""Opens, resumes and closes the agent session behind the chat screen, and wires its subscribers.

The session's events go to the chat screen (through an `EventRelay`) and, when recording is on,
to the feedback store (`feedback_store.attach`). `agent.runtime` is imported here, on first use, so that the
first paint does not wait for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.message_pump import MessagePump

from agent.config import Settings
from tui.relay import EventRelay
from tui.seams import FeedbackStore

if TYPE_CHECKING:  # annotations only: the app's first paint does not wait for the agent
    from agent.interfaces import SessionClient

log = logging.getLogger(__name__)


class SessionHost:
    def __init__(self, target: MessagePump, workspace: Path, settings: Settings, store: FeedbackStore | None) -> None:
        self.target = target
        self.workspace = workspace
        self.settings = settings
        self.store = store
        self.session: SessionClient | None = None
        self.relay: EventRelay | None = None
        self._unsubscribe: list[Callable[[], None]] = []
        self._lessons: Any = None  # the LessonBook of the open session
        self._recording: Any = None  # feedback_store.recording.recording.Recording, while a session is recorded

    async def open(self, session_id: str | None = None, history: list[dict[str, Any]] | None = None) -> SessionClient:
        """Close the current session (if any) and open a new or resumed one."""
        from agent.runtime import open_session

        await self.close()
        self._lessons = self._lesson_book()
        # Opening reads git and builds the repo map's index: off the event loop, so the UI keeps painting.
        session = await asyncio.to_thread(
            open_session,
            self.workspace,
            self.settings,
            frontend="tui",
            session_id=session_id,
            history=history,
            lessons=self._lessons,
        )
        self.relay = EventRelay(self.target)
        if self.store is not None and self.settings.record:
            from feedback_store import attach

            self._recording = attach(session, self.store, warn=self._warn)
        self._unsubscribe.append(session.subscribe(self.relay))
        self.session = session
        return session

    async def close(self) -> None:
        session, self.session = self.session, None
        if session is None:
            return
        session.interrupt()  # a turn still running stops at its next step
        try:
            await session.close()
        finally:
            if self._recording is not None:
                unrecorded = self._recording.close()  # the store stays open: the app reads it
                self._recording = None
                if unrecorded:
                    self._warn(f"{len(unrecorded)} event(s) of this session could not be recorded")
            for unsubscribe in self._unsubscribe:
                unsubscribe()
            self._unsubscribe.clear()
            if self.relay is not None:
                self.relay.flush()
            if self._lessons is not None:
                self._lessons.close()
                self._lessons = None

    def _warn(self, message: str) -> None:
        notify = getattr(self.target, "notify", None)
        if notify is None:
            log.warning("teachback: %s", message)
        else:
            notify(f"teachback: {message}", title="Recording", severity="warning", timeout=15)

    def _lesson_book(self) -> Any:
        """Lessons from the store the app records to (None when lessons are off or nothing is recorded)."""
        if self.store is None or not self.settings.lessons:
            return None
        from feedback_store.lessons.book import LessonBook

        return LessonBook(self.store, scope=self.settings.lessons_scope, team=self.settings.lessons_db)
