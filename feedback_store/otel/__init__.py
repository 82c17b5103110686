"""Sessions and their feedback as OpenTelemetry GenAI spans: planned from recorded events (spans.py,
content.py), sent over OTLP/HTTP with the SDK (send.py), after the fact (export.py) or live (live.py).
The SDK is the optional extra `otel` and loads only in send.py, when something is sent."""
