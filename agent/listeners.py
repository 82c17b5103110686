"""Who hears a session's events: the subscribers of a session in this process or in a worker."""

from __future__ import annotations

import logging
from collections.abc import Callable

from agent.protocol import Event

log = logging.getLogger(__name__)


class Listeners:
    """Each event goes to every subscriber, in the order they subscribed. One that raises is logged
    and stops neither the others, nor the caller, nor the events after it; `failed`, when given, is
    told the event it failed on."""

    def __init__(self, failed: Callable[[Event], None] | None = None) -> None:
        self._callbacks: list[Callable[[Event], None]] = []
        self._failed = failed

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call `callback` with every event from now on; the result unsubscribes."""
        self._callbacks.append(callback)
        return lambda: self._callbacks.remove(callback) if callback in self._callbacks else None

    def emit(self, event: Event) -> Event:
        for callback in list(self._callbacks):
            try:
                callback(event)
            except Exception as exc:  # one broken subscriber must not stop the agent or the others
                log.warning("a listener failed on %s: %r (run with -v for details)", event.type, exc)
                log.debug("event subscriber %r failed on %s", callback, event.type, exc_info=True)
                if self._failed is not None:
                    self._failed(event)
        return event

    def clear(self) -> None:
        self._callbacks.clear()
