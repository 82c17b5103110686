"""`teachback export --otlp ENDPOINT`: recorded sessions sent after the fact as OpenTelemetry GenAI
spans (otel/spans.py) to an OTLP/HTTP receiver, with the same filters and redaction as the file
exports. Sessions the monitor flagged are left out unless asked for, as in every export."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from feedback_store.errors import StoreError
from feedback_store.export.atif import exported_sessions
from feedback_store.export.unroot import unrooted
from feedback_store.otel.content import Content
from feedback_store.otel.spans import FeedbackRow, plan_session
from feedback_store.read_only import open_read_only
from feedback_store.redaction.redactor import Redactor
from feedback_store.store import Store
from feedback_store.team.sharing import resolve

if TYPE_CHECKING:
    from feedback_store.otel.send import Delivery


@dataclass(frozen=True)
class OtlpExport:
    sessions: int
    verdicts: int
    left_out: dict[str, int]
    delivery: Delivery
    redacted_kinds: dict[str, int]


def feedback_rows(store: Store, session_id: str) -> list[FeedbackRow]:
    """The session's feedback pairs, with the event each failure was recorded at."""
    rows = store.query(
        """SELECT id, source, feedback, failure_event_id, error_kind, created_at,
                  (correction_seq IS NOT NULL OR correction IS NOT NULL) AS corrected
           FROM pairs WHERE session_id = ? ORDER BY created_at, id""",
        (session_id,),
    )
    return [FeedbackRow(**{**row, "corrected": bool(row["corrected"])}) for row in rows]


def export_otlp(
    db_paths: Sequence[str | Path],
    endpoint: str,
    *,
    redact: bool = True,
    content: bool = False,
    include_flagged: bool = False,
    shared_only: bool = False,
    model: str | None = None,
    since: float | str | None = None,
) -> OtlpExport:
    """Send every matching session's spans to `endpoint` (a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT
    gives it) and wait for the receiver; raise StoreError when nothing matched."""
    from feedback_store.otel.send import TraceSender

    redactor = Redactor() if redact else None
    left: Counter[str] = Counter()
    seen: set[str] = set()
    verdicts = 0
    with ExitStack() as stack:
        stores = [stack.enter_context(open_read_only(p)) for p in db_paths]
        policy = Content(content, unrooted(redactor, stores))
        chosen: list[tuple[Store, str]] = []
        for store in stores:
            shares = resolve(store.query) if shared_only else {}
            for session_id in exported_sessions(store, include_flagged, model, since):
                if shared_only and not shares[session_id].shared:
                    left[shares[session_id].reason] += 1
                elif session_id in seen:
                    left["duplicates (the same session in several databases)"] += 1
                else:
                    seen.add(session_id)
                    chosen.append((store, session_id))
        if not chosen:
            raise StoreError(
                "Nothing to export: no session matched"
                + (f" (left out: {', '.join(f'{n} {r}' for r, n in left.items())})" if left else "")
                + ". Record or import sessions first, or change the filters. Nothing was sent."
            )
        sender = TraceSender(endpoint, queue=1 << 16)
        for store, session_id in chosen:
            plan = plan_session(store.events(session_id), feedback_rows(store, session_id), policy)
            verdicts += sum(len(s.verdicts) for s in plan.spans)
            sender.send(plan)
            sender.flush()  # one session at a time: the queue never holds more than one
        delivery = sender.close()
    return OtlpExport(len(chosen), verdicts, dict(left), delivery, dict(redactor.counts) if redactor else {})
