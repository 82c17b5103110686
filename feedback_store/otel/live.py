"""A recorded session's turns sent as OpenTelemetry spans while it runs (the `otlp_endpoint` setting).

The session's Recording hands each event over once it is written, so a turn's feedback pairs are in
the store when the turn ends; then the turn's spans go to the SDK's batching processor, whose bounded
queue is sent from the SDK's own thread with a short timeout. A receiver that is down or slow never
slows the session: what could not be sent is dropped, counted and reported when the session closes.
A review or an approval that comes after its turn was sent goes as a log record on the span it judges.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from agent.protocol import Event
from feedback_store.otel.content import Content
from feedback_store.otel.export import feedback_rows
from feedback_store.otel.spans import plan_session
from feedback_store.store import Store

log = logging.getLogger(__name__)

EXPORT_TIMEOUT = 2.0  # seconds per export try, unless OTEL_EXPORTER_OTLP_TIMEOUT says otherwise
CLOSE_TIMEOUT = 2.0  # seconds a closing session waits for the last spans to go
QUEUE = 2048  # spans (and, apart, log records) waiting to be sent; the oldest are dropped beyond it
SKIPPED = frozenset({"assistant_delta"})  # streamed text: the whole reply comes as assistant_message
LATE = frozenset({"edit_reviewed", "approval_resolved"})  # verdicts that may come between turns


class LiveTraces:
    """A session's events in, its turns out as spans (see the module's docstring)."""

    def __init__(self, sender: Any, store: Store, content: Content, warn: Callable[[str], None]) -> None:
        self.sender = sender
        self.store = store
        self.content = content
        self.warn = warn
        self.session: dict[str, Any] = {}
        self.turn: list[dict[str, Any]] | None = None  # the running turn's events
        # edit id -> its edit_applied and the call that made it, for a review after the turn
        self.edits: dict[str, list[dict[str, Any]]] = {}
        self.broken: str | None = None

    def __call__(self, event: Event) -> None:
        if self.broken is not None or event.type in SKIPPED:
            return
        try:
            self._take(event.to_dict())
        except Exception as exc:  # a fault here must not reach the session: stop sending, say why at close
            log.warning("OpenTelemetry export stopped: %r", exc, exc_info=True)
            self.broken = repr(exc)

    def _take(self, data: dict[str, Any]) -> None:
        kind = data["type"]
        if kind == "session_started":
            self.session = data
            return
        if kind == "edit_applied" and self.turn is not None:
            made = [e for e in self.turn if e["type"] == "tool_call_started" and e["call_id"] == data["call_id"]]
            slim = {k: data[k] for k in ("type", "id", "ts", "edit_id", "call_id")}  # not the file's text
            self.edits[data["edit_id"]] = [*made[:1], slim]
        if kind == "turn_started":
            self.turn = [data]
        elif self.turn is not None:
            self.turn.append(data)
            if kind == "turn_finished":
                events, self.turn = self.turn, None
                self._send(events)
        elif kind in LATE:
            self._send([*self.edits.get(data.get("edit_id") or "", []), data])

    def _send(self, events: list[dict[str, Any]]) -> None:
        ids = {e["id"] for e in events}
        pairs = [p for p in feedback_rows(self.store, events[-1]["session_id"]) if p.failure_event_id in ids]
        self.sender.send(plan_session([self.session, *events] if self.session else events, pairs, self.content))

    def close(self) -> None:
        """Send what is left (a turn still open is sent as unfinished) and say what was dropped."""
        if self.turn and self.broken is None:
            events, self.turn = self.turn, None
            self._send(events)
        delivery = self.sender.close()
        if delivery.dropped or self.broken:
            problem = f"; export stopped after an error: {self.broken}" if self.broken else ""
            self.warn(f"OpenTelemetry: {delivery.summary()}{problem}.")
        else:
            log.info("OpenTelemetry: %s.", delivery.summary())


def live_traces(settings: Any, store: Store, warn: Callable[[str], None]) -> LiveTraces | None:
    """The live exporter the settings ask for (None when `otlp_endpoint` is unset, OTEL_SDK_DISABLED
    is true, or the SDK is not installed: then `warn` says how to install it)."""
    import os

    if not settings.otlp_endpoint or os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    from feedback_store.export.unroot import unrooted
    from feedback_store.otel.send import OtlpUnavailable, TraceSender
    from feedback_store.redaction.redactor import Redactor

    try:
        sender = TraceSender(settings.otlp_endpoint, timeout=EXPORT_TIMEOUT, queue=QUEUE, close_timeout=CLOSE_TIMEOUT)
    except OtlpUnavailable as exc:
        warn(f"OpenTelemetry export is off: {exc}")
        return None
    return LiveTraces(sender, store, Content(settings.otlp_content, unrooted(Redactor(), [store])), warn)
