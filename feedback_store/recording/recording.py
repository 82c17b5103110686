"""`attach(session, store)`: the one way a host records a session, with one failure policy.

Every host (the command line, the demo, the language server's worker, the terminal app) records
the same way:
- the session never sees a StoreError: when the database stops taking writes, events wait in
  memory, in order, and `warn` is told once (and again when recording catches up);
- what is still pending is retried at the end of every turn, and written by `close()` waiting
  the store's full `db_wait`;
- `close()` says what could not be written, so a host can tell the person (the command line
  exits 3);
- when the session's settings name an `otlp_endpoint`, each event, once written, also goes to the
  live OpenTelemetry exporter (feedback_store/otel/live.py), which `close()` closes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from agent.protocol import Event, TurnFinished
from feedback_store.errors import StoreError
from feedback_store.recording.recorder import Recorder
from feedback_store.store import Store

log = logging.getLogger(__name__)


def _log_warning(message: str) -> None:
    log.warning("%s", message)


class Recording:
    """A session's recorder while it is attached; `close()` detaches it and flushes."""

    def __init__(
        self,
        subscribe: Callable[[Callable[[Event], None]], Callable[[], None]],
        store: Store,
        *,
        then: Callable[[Event], None] | None = None,
        warn: Callable[[str], None] = _log_warning,
        settings: Any = None,
    ) -> None:
        self.store = store
        self.warn = warn
        self.troubled = False  # recording failed at some point (the person was told)
        self._behind = False  # events wait in memory now
        self.recorder = Recorder(store, then=then, on_error=self._failing)
        self.traces = _live_traces(settings, store, warn)
        self._unsubscribe: Callable[[], None] | None = subscribe(self._on_event)

    def _on_event(self, event: Event) -> None:
        self.recorder(event)
        if isinstance(event, TurnFinished) and self.recorder.pending:
            self.recorder.flush(wait=0)
        self._caught_up()
        if self.traces is not None:
            self.traces(event)

    def _failing(self, error: StoreError) -> None:
        self.troubled = True
        self._behind = self._behind or bool(self.recorder.pending)  # else: events refused for good
        self.warn(f"recording is failing: {error}")

    def _caught_up(self) -> None:
        if self._behind and not self.recorder.pending:
            self._behind = False
            self.warn(f"recording caught up: every event is in {self.store.path}.")

    @property
    def error(self) -> StoreError | None:
        return self.recorder.error

    def flush(self, wait: float | None = None) -> list[Event]:
        """Write what is pending (waiting up to `wait` s, default the store's); return what is not."""
        left = self.recorder.flush(wait)
        self._caught_up()
        return left

    def close(self, *, close_store: bool = False) -> list[Event]:
        """Detach, write what is pending, and return the events that are not recorded (pending
        still, or refused by the database)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        unrecorded = self.flush() + self.recorder.lost
        if self.traces is not None:
            self.traces.close()
            self.traces = None
        if close_store:
            self.store.close()
        return unrecorded


def attach(
    session,
    store: Store,
    *,
    then: Callable[[Event], None] | None = None,
    warn: Callable[[str], None] = _log_warning,
) -> Recording:
    """Record everything `session` emits into `store` from now on (see the module's docstring).
    `then` sees each event once it is committed (at once while recording is failing)."""
    return Recording(session.subscribe, store, then=then, warn=warn, settings=session.settings)


def _live_traces(settings: Any, store: Store, warn: Callable[[str], None]) -> Any:
    """The live OpenTelemetry exporter, loaded only when the settings ask for one."""
    if settings is None or not settings.otlp_endpoint:
        return None
    from feedback_store.otel.live import live_traces

    return live_traces(settings, store, warn)
