"""Sessions as OpenTelemetry GenAI spans, without a receiver that takes them: the span plan of a
recorded session (content off and on), the live exporter against a receiver that is down or hangs,
the command line's checks, and that nothing loads the SDK unless asked. Phoenix receiving them:
test_otel_phoenix.py."""

from __future__ import annotations

import asyncio
import gzip
import http.server
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent.config import ConfigError, Settings, load_settings
from agent.protocol import UserInput
from agent.runtime import open_session
from feedback_store import attach, open_store
from feedback_store.otel.content import MASK, Content, mask
from feedback_store.otel.export import feedback_rows
from feedback_store.otel.live import CLOSE_TIMEOUT
from feedback_store.otel.spans import plan_session
from feedback_store.redaction.redactor import Redactor
from tests.conftest import call, turn
from tests.store.test_redact import chars

KEY = "sk-" + "proj-" + chars(48, "otel")  # an OpenAI key, as the redaction rules know them
TURNS = 6


def record(git_repo: Path, script, db: Path, **settings) -> tuple[str, list[str]]:
    """A turn that fails an edit (the old text quotes a key), fixes it and finishes: (id, warnings)."""
    model = script(
        turn(call("edit_file", {"path": "app.py", "old_text": f"Howdy {KEY}", "new_text": "Hi"}, "c1")),
        turn(call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Hi there"}, "c2")),
        turn(call("finish", {"summary": "greeting changed"}, "c3")),
    )
    store = open_store(db)
    session = open_session(git_repo, Settings(model=model, approval="full-auto", repo_map_tokens=0, **settings))
    said: list[str] = []
    recording = attach(session, store, warn=said.append)
    asyncio.run(session.run(UserInput(text="make the greeting friendlier")))
    asyncio.run(session.close())
    assert recording.close() == []
    store.close()
    return session.id, said


def planned(db: Path, session_id: str, content: bool):
    with open_store(db) as store:
        return plan_session(store.events(session_id), feedback_rows(store, session_id), Content(content, Redactor()))


def test_a_session_plans_as_one_turn_trace_with_the_pair_on_the_failing_call(git_repo, script, tmp_path):
    db = tmp_path / "feedback.db"
    session_id, _ = record(git_repo, script, db)
    plan = planned(db, session_id, content=False)
    assert plan.loose == []
    root, *children = plan.spans
    assert (root.name, root.parent, root.attributes["gen_ai.conversation.id"]) == (
        "invoke_agent teachback",
        None,
        session_id,
    )
    assert [c.name.split()[0] for c in children] == ["chat", "execute_tool"] * 3
    assert {c.parent for c in children} == {root.key}
    tools = {c.attributes["gen_ai.tool.call.id"]: c for c in children if c.name.startswith("execute_tool")}
    assert tools["c1"].error == "no_match" and tools["c2"].error is None
    (verdict,) = tools["c1"].verdicts
    assert (verdict.name, verdict.label) == ("teachback.tool", "fail")
    assert verdict.attributes["teachback.pair.corrected"] is True
    # Content off: the feedback travels, the arguments it quotes do not, and no message or argument does.
    assert "not found" in verdict.explanation and "app.py" not in verdict.explanation
    keys = {k for span in plan.spans for k in span.attributes}
    assert not [k for k in keys if k.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.tool.call.arg"))]
    assert "make the greeting" not in repr(plan) and KEY not in repr(plan) and "Howdy" not in repr(plan)


def test_with_content_messages_and_arguments_travel_redacted(git_repo, script, tmp_path):
    db = tmp_path / "feedback.db"
    session_id, _ = record(git_repo, script, db)
    plan = planned(db, session_id, content=True)
    root = plan.spans[0]
    assert "make the greeting friendlier" in root.attributes["gen_ai.input.messages"]
    assert "greeting changed" in root.attributes["gen_ai.output.messages"]
    arguments = next(s for s in plan.spans if s.attributes.get("gen_ai.tool.call.id") == "c1")
    assert "Howdy" in arguments.attributes["gen_ai.tool.call.arguments"]
    assert KEY not in repr(plan)  # redacted as exports are


def test_mask_replaces_argument_values_and_their_long_lines():
    arguments = {"path": "src/app.py", "old_text": "first line here\nsecond line here", "count": "3"}
    text = "src/app.py: no match for first line here\nsecond line here (the 3rd try)"
    assert mask(text, arguments) == f"{MASK}: no match for {MASK} (the 3rd try)"
    assert mask("first line here, elsewhere", arguments) == f"{MASK}, elsewhere"
    assert mask("nothing quoted", '{"raw": "text"}') == "nothing quoted"


def _hung_receiver() -> tuple[socket.socket, int]:
    """A port that takes connections and never answers (the kernel completes them; nothing reads)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    return listener, listener.getsockname()[1]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _turns(git_repo: Path, script, db: Path, endpoint: str | None) -> tuple[float, float, list[str]]:
    """TURNS turns of two calls each: (seconds the turns took, seconds close took, warnings)."""
    steps = []
    for _ in range(TURNS):
        steps += [turn(call("read_file", {"path": "app.py"})), turn(call("finish", {"summary": "read it"}))]
    model = script(*steps, name=f"turns-{endpoint is None}.json")
    settings = Settings(model=model, approval="full-auto", repo_map_tokens=0, lessons=False, otlp_endpoint=endpoint)
    store = open_store(db)
    session = open_session(git_repo, settings)
    said: list[str] = []
    recording = attach(session, store, warn=said.append)

    async def run() -> float:
        began = time.monotonic()
        for n in range(TURNS):
            assert (await session.run(UserInput(text=f"read app.py ({n})"))).reason == "finished"
        took = time.monotonic() - began
        await session.close()
        return took

    took = asyncio.run(run())
    began = time.monotonic()
    assert recording.close() == []
    closing = time.monotonic() - began
    store.close()
    return took, closing, said


def test_a_receiver_that_is_down_or_hangs_never_slows_the_session_and_the_drops_are_counted(git_repo, script, tmp_path):
    base, _, quiet = _turns(git_repo, script, tmp_path / "base.db", None)
    assert quiet == []
    spans = TURNS * 5  # a turn, two model calls, two tool calls
    listener, hung = _hung_receiver()
    try:
        for name, port in (("refused", _closed_port()), ("hung", hung)):
            took, closing, said = _turns(git_repo, script, tmp_path / f"{name}.db", f"http://127.0.0.1:{port}")
            # Each export waits up to 2 s on a hung receiver: on the session's path that would add 12 s.
            assert took < 2 * base + 3.0, (name, took, base)
            assert closing < CLOSE_TIMEOUT + 2.0, (name, closing)
            (message,) = said
            assert re.search(
                rf"OpenTelemetry: 0 of {spans} spans sent to http://127.0.0.1:{port}/v1/traces; {spans} dropped",
                message,
            ), message
    finally:
        listener.close()


def test_the_setting_takes_only_http_urls(tmp_path):
    assert load_settings(None, env={"TEACHBACK_OTLP_ENDPOINT": "http://localhost:4318"}).otlp_endpoint
    with pytest.raises(ConfigError, match="otlp_endpoint must be an http:// or https:// base URL"):
        load_settings(None, env={"TEACHBACK_OTLP_ENDPOINT": "localhost:4318"})
    with pytest.raises(ConfigError, match="Give 'http://localhost:4318'"):
        load_settings(None, env={"TEACHBACK_OTLP_ENDPOINT": "http://localhost:4318/v1/traces"})


def test_export_needs_a_format_and_a_file_or_an_otlp_url(teachback_home, capsys):
    from cli.entry import main

    assert main(["export"]) == 2
    assert "--format and --out required (or --otlp ENDPOINT" in capsys.readouterr().err
    assert main(["export", "--otlp", "localhost:4318"]) == 2
    assert "--otlp must be an http:// or https:// base URL" in capsys.readouterr().err
    assert main(["export", "--otlp", "http://localhost:4318", "--format", "sft"]) == 2
    assert "--format do nothing with --otlp" in capsys.readouterr().err


def test_nothing_loads_the_sdk_unless_an_endpoint_is_set(git_repo, script, tmp_path):
    model = script(turn(call("finish", {"summary": "nothing to do"})))
    probe = f"""
import asyncio, sys
from agent.config import Settings
from agent.protocol import UserInput
from agent.runtime import open_session
from feedback_store import attach, open_store
session = open_session({str(git_repo)!r}, Settings(model={model!r}, approval="full-auto", repo_map_tokens=0))
recording = attach(session, open_store({str(tmp_path / "probe.db")!r}))
asyncio.run(session.run(UserInput(text="nothing")))
recording.close(close_store=True)
print(sorted(name for name in sys.modules if name.startswith("opentelemetry.sdk")))
"""
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


class _Wire(http.server.BaseHTTPRequestHandler):
    """Answers every OTLP request with success and keeps what came (path, headers, raw body)."""

    got: list[tuple[str, dict[str, str], bytes]]

    def do_POST(self) -> None:  # noqa: N802 (the http.server name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.got.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        return None  # the test reads what came, not the server's log lines


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_spans_and_evaluation_logs_go_as_protobuf_compressed_only_when_asked(
    git_repo, script, tmp_path, monkeypatch, compression
):
    """The wire, as a receiver that takes OTLP logs sees it (Phoenix takes none: test_otel_phoenix.py)."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from feedback_store.otel.export import export_otlp

    db = tmp_path / "feedback.db"
    session_id, _ = record(git_repo, script, db)
    handler = type("Wire", (_Wire,), {"got": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    if compression:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", compression)
    try:
        result = export_otlp([db], f"http://127.0.0.1:{server.server_address[1]}/")
    finally:
        server.shutdown()
        server.server_close()
    assert (result.delivery.spans_sent, result.delivery.logs_sent) == (7, 1)
    by_path = {path: (headers, body) for path, headers, body in handler.got}
    assert set(by_path) == {"/v1/traces", "/v1/logs"}
    for headers, _ in by_path.values():
        assert headers["content-type"] == "application/x-protobuf"
        assert headers.get("content-encoding") == compression
    unpack = gzip.decompress if compression else bytes
    traces = ExportTraceServiceRequest.FromString(unpack(by_path["/v1/traces"][1]))
    spans = [s for r in traces.resource_spans for scope in r.scope_spans for s in scope.spans]
    failed = next(s for s in spans if any(a.key == "error.type" for a in s.attributes))
    logs = ExportLogsServiceRequest.FromString(unpack(by_path["/v1/logs"][1]))
    (record_,) = [r for rl in logs.resource_logs for scope in rl.scope_logs for r in scope.log_records]
    assert record_.event_name == "gen_ai.evaluation.result"
    assert (record_.trace_id, record_.span_id) == (failed.trace_id, failed.span_id)
    assert {a.key: a.value.string_value for a in record_.attributes}["gen_ai.evaluation.score.label"] == "fail"
    assert session_id in str(failed.attributes)


def test_the_command_line_says_how_many_spans_a_down_receiver_dropped(git_repo, script):
    model = script(turn(call("read_file", {"path": "app.py"})), turn(call("finish", {"summary": "read it"})))
    endpoint = f"http://127.0.0.1:{_closed_port()}"
    command = [sys.executable, "-m", "cli", "run", "--workspace", str(git_repo), "--model", model]
    done = subprocess.run(
        [*command, "--approval", "full-auto", "read app.py"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | {"TEACHBACK_OTLP_ENDPOINT": endpoint},
    )
    assert done.returncode == 0, done.stderr
    assert f"teachback: OpenTelemetry: 0 of 5 spans sent to {endpoint}/v1/traces; 5 dropped (" in done.stderr
    assert "Connection refused" in done.stderr and "Traceback" not in done.stderr


def test_imported_sessions_plan_with_every_pair_on_a_span(teachback_home):
    from cli.entry import main

    logs = Path(__file__).parent / "data" / "agent_logs"
    assert main(["import", "claude-code", str(logs / "claude-code")]) == 0
    assert main(["import", "codex", str(logs / "codex")]) == 0
    with open_store(teachback_home / "feedback.db") as store:
        placed, pairs = [], 0
        for session_id in sorted(store.session_ids()):
            rows = feedback_rows(store, session_id)
            pairs += len(rows)
            plan = plan_session(store.events(session_id), rows, Content())
            assert plan.loose == []
            placed += [
                (s.name.split()[0], v.name)
                for s in plan.spans
                for v in s.verdicts
                if "teachback.pair.id" in v.attributes
            ]
    assert pairs and len(placed) == pairs
    assert ("invoke_agent", "teachback.user") in placed  # a reply interrupted and corrected in words: its turn
    assert {name for kind, name in placed if kind == "execute_tool"} >= {"teachback.tool", "teachback.test"}
