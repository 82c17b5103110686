"""Opens, resumes and closes the agent session behind the chat screen, and wires its subscribers.

The session's events go to the chat screen (through an `EventRelay`) and, when recording is on,
to the feedback store (host.session: the app's store, recorder and lessons). The agent is imported
here, on first use, so that the first paint does not wait for it.
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
        self._hosted: Any = None  # host.session.HostedSession: the open session's recording and lessons

    async def open(self, session_id: str | None = None, history: list[dict[str, Any]] | None = None) -> SessionClient:
        """Close the current session (if any) and open a new or resumed one."""
        from host.session import IfNoStore, open_recorded

        await self.close()
        # Opening reads git and builds the repo map's index: off the event loop, so the UI keeps painting.
        # The app's own store records it, when the app could open one (it said so when it could not).
        self._hosted = await asyncio.to_thread(
            open_recorded,
            self.workspace,
            self.settings,
            frontend="tui",
            if_no_store=IfNoStore.UNRECORDED,
            store=self.store,
            session_id=session_id,
            history=history,
            warn=self._warn,
        )
        session = self._hosted.session
        self.relay = EventRelay(self.target)
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
            hosted, self._hosted = self._hosted, None
            unrecorded = hosted.stop()  # the app's store stays open: the app reads it
            if unrecorded:
                self._warn(f"{len(unrecorded)} event(s) of this session could not be recorded")
            for unsubscribe in self._unsubscribe:
                unsubscribe()
            self._unsubscribe.clear()
            if self.relay is not None:
                self.relay.flush()
            hosted.close()

    def _warn(self, message: str) -> None:
        notify = getattr(self.target, "notify", None)
        if notify is None:
            log.warning("teachback: %s", message)
        else:
            notify(f"teachback: {message}", title="Recording", severity="warning", timeout=15)
