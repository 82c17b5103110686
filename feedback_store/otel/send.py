"""Span plans (otel/spans.py) sent over OTLP/HTTP protobuf with the OpenTelemetry SDK, counted.

Spans go to ENDPOINT/v1/traces; each evaluation result also goes as a log record, parented to the
span it judges, to ENDPOINT/v1/logs, for receivers that take OTLP logs (one that does not, such as
Arize Phoenix, answers 404 and keeps the span events). Headers, compression, timeouts and
certificates come from the standard OTEL_EXPORTER_OTLP_* variables, as the SDK's exporters read
them. The SDK loads only when a sender is made: it is an optional extra (`pip install 'teachback[otel]'`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from common.text import one_line
from feedback_store.otel.spans import AGENT_NAME, EVALUATION_EVENT, Plan, SpanPlan, Verdict
from feedback_store.team.provenance import teachback_version

TRACES_PATH = "v1/traces"
LOGS_PATH = "v1/logs"
# The SDK's own loggers that speak of failed exports: while a sender runs, their records are kept as
# the reason it reports (and shown only with -v), not printed into the person's terminal.
EXPORT_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http._log_exporter",
    "opentelemetry.sdk._shared_internal",
)
REASON_LENGTH = 300
# Longest attribute value sent (a tool's result with content on can be megabytes), unless the
# standard variables set one.
ATTRIBUTE_LENGTH = 32 * 1024
ATTRIBUTE_LIMIT_VARIABLES = ("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT")
INSTALL_HINT = "install it with `pip install 'teachback[otel]'` (opentelemetry-sdk and its OTLP/HTTP exporter)"


class OtlpUnavailable(Exception):
    """The OpenTelemetry SDK is not installed; the message says how to install it."""


@dataclass(frozen=True)
class Delivery:
    """What a sender achieved: spans and log records handed to it, and those the receiver took."""

    url: str
    spans: int
    spans_sent: int
    logs: int
    logs_sent: int
    reason: str | None  # the last export failure the SDK reported

    @property
    def dropped(self) -> int:
        return self.spans - self.spans_sent

    def summary(self) -> str:
        text = f"{self.spans_sent} of {self.spans} spans sent to {self.url}"
        if self.dropped:
            text += f"; {self.dropped} dropped" + (f" ({self.reason})" if self.reason else "")
        if self.spans_sent and self.logs and not self.logs_sent:
            text += "; the receiver took no OTLP log records, so evaluation results went as span events only"
        return text


def signal_url(base: str, path: str) -> str:
    """A signal's URL from a base URL as OTEL_EXPORTER_OTLP_ENDPOINT gives it."""
    return f"{base.rstrip('/')}/{path}"


class TraceSender:
    """Spans and evaluation log records through batching processors with bounded queues; `close()`
    waits at most `close_timeout` seconds and says what was sent. `timeout` bounds each export (None:
    OTEL_EXPORTER_OTLP_TIMEOUT's, or the SDK's 10 s)."""

    def __init__(
        self,
        base: str,
        *,
        timeout: float | None = None,
        queue: int = 2048,
        delay: float = 1.0,
        close_timeout: float = 30.0,
    ) -> None:
        try:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk._logs import LoggerProvider, LogRecordLimits
            from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import SpanLimits, TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as exc:
            raise OtlpUnavailable(f"the OpenTelemetry SDK is not installed ({exc}): {INSTALL_HINT}.") from None
        self.url = signal_url(base, TRACES_PATH)
        self.close_timeout = close_timeout
        self.quiet = _Quiet()
        for name in EXPORT_LOGGERS:
            logging.getLogger(name).addFilter(self.quiet)
        timeout = timeout if not _timeout_configured() else None
        resource = Resource.create({"service.version": teachback_version()})
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": AGENT_NAME}))
        length = None if any(os.environ.get(v) for v in ATTRIBUTE_LIMIT_VARIABLES) else ATTRIBUTE_LENGTH
        batching = {"max_queue_size": queue, "schedule_delay_millis": delay * 1000, "max_export_batch_size": 512}
        self.spans = _Counted(OTLPSpanExporter(endpoint=self.url, timeout=timeout))
        self.traces = TracerProvider(
            resource=resource, shutdown_on_exit=False, span_limits=SpanLimits(max_attribute_length=length)
        )
        self.traces.add_span_processor(BatchSpanProcessor(self.spans, **batching))
        self.tracer = self.traces.get_tracer("teachback", teachback_version())
        self.logs = _Counted(OTLPLogExporter(endpoint=signal_url(base, LOGS_PATH), timeout=timeout))
        self.logging = LoggerProvider(
            resource=resource,
            shutdown_on_exit=False,
            log_record_limits=LogRecordLimits(max_attribute_length=length),
        )
        self.logging.add_log_record_processor(BatchLogRecordProcessor(self.logs, **batching))
        self.logger = self.logging.get_logger("teachback", teachback_version())
        self.handed = 0
        self.logs_handed = 0
        self.contexts: dict[str, Any] = {}  # call id -> its execute_tool span's context, for late verdicts

    def send(self, plan: Plan) -> None:
        """Every span of `plan` (parents before children, as planned), then its loose verdicts as
        log records on the spans they judge, where those were sent earlier."""
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        made: dict[str, Any] = {}
        for span_plan in plan.spans:
            parent = made.get(span_plan.parent) if span_plan.parent else None
            context = trace.set_span_in_context(trace.NonRecordingSpan(parent)) if parent is not None else None
            span = self.tracer.start_span(
                span_plan.name,
                context=context,
                kind=SpanKind.CLIENT if span_plan.kind == "client" else SpanKind.INTERNAL,
                attributes=span_plan.attributes,
                start_time=_ns(span_plan.start),
            )
            for verdict in span_plan.verdicts:
                span.add_event(EVALUATION_EVENT, verdict.event_attributes(), timestamp=_ns(verdict.ts))
            if span_plan.error:
                span.set_status(Status(StatusCode.ERROR, span_plan.error))
            span.end(end_time=_ns(max(span_plan.start, span_plan.end)))
            made[span_plan.key] = span.get_span_context()
            self.handed += 1
            self._remember(span_plan, made[span_plan.key])
            self._log(span_plan.verdicts, made[span_plan.key])
        for verdict in plan.loose:
            context = self.contexts.get(verdict.call_id or "")
            if context is not None:
                self._log([verdict], context)

    def _remember(self, span_plan: SpanPlan, context: Any) -> None:
        call_id = span_plan.attributes.get("gen_ai.tool.call.id")
        if call_id:
            self.contexts[str(call_id)] = context

    def _log(self, verdicts: Iterable[Verdict], context: Any) -> None:
        from opentelemetry import trace
        from opentelemetry._logs import SeverityNumber

        for verdict in verdicts:
            self.logger.emit(
                timestamp=_ns(verdict.ts),
                context=trace.set_span_in_context(trace.NonRecordingSpan(context)),
                severity_number=SeverityNumber.INFO,
                body=verdict.explanation,
                attributes=verdict.event_attributes(),
                event_name=EVALUATION_EVENT,
            )
            self.logs_handed += 1

    def flush(self) -> None:
        """Send what is queued now (blocking while the exporters try)."""
        self.traces.force_flush()
        self.logging.force_flush()

    def close(self) -> Delivery:
        """Send what is left, waiting at most `close_timeout` s; what is still queued then is dropped.
        The SDK's shutdown has no time limit of its own, so it runs in a daemon thread that is left
        to finish its last try (bounded by the export timeout) when the wait is over."""
        import threading

        def shut() -> None:
            self.traces.shutdown()
            self.logging.shutdown()

        closing = threading.Thread(target=shut, name="teachback-otlp-close", daemon=True)
        closing.start()
        closing.join(self.close_timeout)
        if not closing.is_alive():  # else its last complaints stay quiet too
            for name in EXPORT_LOGGERS:
                logging.getLogger(name).removeFilter(self.quiet)
        return Delivery(self.url, self.handed, self.spans.sent, self.logs_handed, self.logs.sent, self.quiet.reason)


class _Counted:
    """An exporter that counts what its receiver accepted."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sent = 0

    def export(self, batch: Sequence[Any]) -> Any:
        result = self.inner.export(batch)
        if result.name == "SUCCESS":  # SpanExportResult and LogRecordExportResult alike
            self.sent += len(batch)
        return result

    def shutdown(self, *args: Any, **kwargs: Any) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


class _Quiet(logging.Filter):
    """Keeps the SDK's first export complaint per logger (the one that names the cause, such as a
    refused connection); lets them through only with -v (DEBUG)."""

    def __init__(self) -> None:
        super().__init__()
        self.reasons: dict[str, str] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            self.reasons.setdefault(record.name, one_line(record.getMessage(), REASON_LENGTH))
        return logging.getLogger().isEnabledFor(logging.DEBUG)

    @property
    def reason(self) -> str | None:
        """Why spans were not sent: the span exporter's complaint, else the batching processor's."""
        return self.reasons.get(EXPORT_LOGGERS[0]) or self.reasons.get(EXPORT_LOGGERS[2])


def _timeout_configured() -> bool:
    return any(os.environ.get(v) for v in ("OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"))


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)
