"""`open_recorded`: the one way a session is opened with its store, recorder and lessons.

What happens when the feedback database cannot be opened is the caller's choice, one of two
(`IfNoStore`):
- `REFUSE`: the StoreError is raised, before anything has run (the command line stops and says how to
  run unrecorded; a task attempt is reported failed, since an attempt counts only once recorded).
  A database that takes no writes is refused too.
- `UNRECORDED`: the session runs without recording, and `HostedSession.warnings` says why (the
  editors' doors show it).
Recording itself goes through `feedback_store.attach` (its own policy for a database that stops
taking writes midway), and `HostedSession.close()` closes what was opened here, in one order.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.config import Settings
from agent.protocol import Event, SessionStarted
from agent.runtime import open_session
from agent.session import Session
from feedback_store import Recording, Store, StoreError, attach, open_store
from feedback_store.lessons.book import LessonBook, book_for

log = logging.getLogger(__name__)


class IfNoStore(enum.Enum):
    """What to do when the feedback database cannot be opened (see the module's docstring)."""

    REFUSE = "refuse"
    UNRECORDED = "unrecorded"


SETTINGS_DB = "the settings' db"  # `store=`: open the database the settings name (and close it)


def _log_warning(message: str) -> None:
    log.warning("%s", message)


@dataclass
class HostedSession:
    """A session and what records it: its recording (None: not recorded, `why_not` says why), the
    store, the lessons it is shown and the warnings for the person."""

    session: Session
    recording: Recording | None
    store: Store | None
    lessons: LessonBook | None
    owns_store: bool
    why_not: str | None = None
    warnings: list[str] = field(default_factory=list)
    _unrecorded: list[Event] | None = None

    @property
    def recording_at(self) -> str | None:
        """The database the session is recorded in (None: not recorded)."""
        return str(self.store.path) if self.recording is not None and self.store is not None else None

    def record(self, event: Event) -> None:
        """Record an event from outside the session (a grader's run after the agent's last step)."""
        if self.recording is not None:
            self.recording.recorder(event)

    def stop(self) -> list[Event]:
        """Detach the recording and write what is pending; the events that are not recorded. The
        store stays open until `close()`, for a host that reads what was recorded."""
        if self._unrecorded is None:
            self._unrecorded = self.recording.close() if self.recording is not None else []
        return self._unrecorded

    def close(self) -> list[Event]:
        """Stop recording, close the lessons and the store opened here (a caller's store stays
        open); the events that are not recorded. The session itself is closed by its own loop
        (`await session.close()`), before this."""
        unrecorded = self.stop()
        if self.lessons is not None:
            self.lessons.close()
            self.lessons = None
        if self.owns_store and self.store is not None:
            self.store.close()
            self.owns_store = False
        return unrecorded


def open_recorded(
    workspace: str | Path,
    settings: Settings,
    *,
    frontend: str,
    if_no_store: IfNoStore,
    store: Store | str | None = SETTINGS_DB,
    record: bool | None = None,
    lessons: bool = True,
    session_id: str | None = None,
    history: list[dict[str, Any]] | None = None,
    resume: bool = False,
    then: Callable[[Event], None] | None = None,
    warn: Callable[[str], None] = _log_warning,
    config: dict[str, Any] | None = None,
    **session_options: Any,
) -> HostedSession:
    """A session on `workspace`, recorded when `record` (default: the settings' `record`) into
    `store`: the settings' database (opened here; `if_no_store` says what happens when it cannot be),
    a store the caller holds open (kept open), or None (the caller's store could not be opened:
    nothing is recorded). `history` is the conversation a resumed session goes on from; `resume`
    reads it from the store instead. Lessons from the same database are shown unless `lessons` is
    false or the settings turn them off. `then` sees each event once recorded (at once when not
    recorded), `warn` hears of recording trouble, `config` is added to the recorded SessionStarted's
    config (a rollout's task), and `session_options` go to `agent.runtime.open_session` (`terminal`,
    `mcp_servers`). Blocking."""
    record = settings.record if record is None else record
    hosted_store, owns_store, why_not, warnings = _store(settings, store, record or resume, if_no_store)
    if resume and hosted_store is not None:
        try:
            history = hosted_store.conversation(session_id or "")
        except StoreError as exc:  # never recorded (record = false): it starts afresh
            warnings.append(f"the session starts afresh: {exc}")
    book = _lessons(settings, store, hosted_store) if lessons else None
    try:
        session = open_session(
            workspace,
            settings,
            frontend=frontend,
            session_id=session_id,
            history=history,
            lessons=book,
            **session_options,
        )
    except BaseException:
        if book is not None:
            book.close()
        if owns_store and hosted_store is not None:
            hosted_store.close()
        raise
    recording = None
    if record and hosted_store is not None:
        source = session if config is None else _WithConfig(session, config)
        recording = attach(source, hosted_store, then=then, warn=warn)
    else:
        why_not = why_not or ("record = false" if not record else "no feedback store")
        if then is not None:
            session.subscribe(then)
    return HostedSession(session, recording, hosted_store, book, owns_store, why_not, warnings)


def _store(
    settings: Settings, given: Store | str | None, wanted: bool, if_no_store: IfNoStore
) -> tuple[Store | None, bool, str | None, list[str]]:
    """(the store, whether it was opened here, why there is none, warnings)."""
    if given is not SETTINGS_DB:
        return given, False, None, []  # type: ignore[return-value]
    if not wanted:
        return None, False, None, []
    opened = None
    try:
        opened = open_store(settings.db_path(), timeout=settings.db_wait)
        if if_no_store is IfNoStore.REFUSE:
            opened.check_writable()  # a read-only database stops the session before it acts
    except StoreError as exc:
        if opened is not None:
            opened.close()
        if if_no_store is IfNoStore.REFUSE:
            raise
        return None, False, str(exc), [f"teachback is not recording feedback: {exc}"]
    return opened, True, None, []


def _lessons(settings: Settings, given: Store | str | None, store: Store | None) -> LessonBook | None:
    """The lessons from the store the session is recorded in (one connection for both), else from the
    settings' database when nothing is recorded (None: lessons off, or nothing to learn from)."""
    if not settings.lessons:
        return None
    if store is not None:
        return LessonBook(store, scope=settings.lessons_scope, team=settings.lessons_db)
    return book_for(settings) if given is SETTINGS_DB else None


class _WithConfig:
    """The session as its recording sees it: its SessionStarted carries `config` besides its own."""

    def __init__(self, session: Session, config: dict[str, Any]) -> None:
        self.session = session
        self.settings = session.settings
        self.config = config

    def subscribe(self, listener: Callable[[Event], None]) -> Callable[[], None]:
        def tagged(event: Event) -> None:
            if isinstance(event, SessionStarted):
                event = dataclasses.replace(event, config={**event.config, **self.config})
            listener(event)

        return self.session.subscribe(tagged)
