"""Sessions as OpenTelemetry GenAI spans, received by a real OTLP receiver: Arize Phoenix, started
here from its own venv (`make test` builds .venv-phoenix), and read back through Phoenix's REST API.

One session is recorded with live export on (a failing edit and its fix, a command the user denies,
then a review rejecting the fixed edit); it is then exported after the fact, once without and once
with content. Each kind of send goes to a Phoenix project of its own."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from agent.config import Settings
from agent.protocol import ApprovalDecision, ApprovalRequested, EditApplied, ReviewEdit, UserInput
from agent.runtime import open_session
from feedback_store import attach, open_store
from tests.conftest import call, git, require_installed, turn

ROOT = Path(__file__).resolve().parents[2]
PHOENIX = ROOT / ".venv-phoenix" / "bin" / "phoenix"
PROJECT = "openinference.project.name"  # the resource attribute that picks Phoenix's project
START_WAIT = 540  # seconds for Phoenix to start: 25 s on a quiet machine, minutes on two busy cores
PROMPT = "Greet people warmly PROMPTMARK-7f3a"
ARGUMENTS = ("ARGMARK-one", "ARGMARK-two", "ARGMARK-three")
pytestmark = pytest.mark.timeout(900)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory):
    """Phoenix serving on free ports; its base URL (OTLP/HTTP and REST share it). TEACHBACK_TEST_PHOENIX
    names one already running instead (its start takes minutes on a busy machine)."""
    if os.environ.get("TEACHBACK_TEST_PHOENIX"):
        yield os.environ["TEACHBACK_TEST_PHOENIX"].rstrip("/")
        return
    require_installed(PHOENIX, "Arize Phoenix", "run `make .venv-phoenix/.installed` (`make test` does)")
    work = tmp_path_factory.mktemp("phoenix")
    port, grpc = _free_port(), _free_port()
    env = os.environ | {
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (work / "phoenix.log").open("wb")
    server = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_WAIT
        while not _healthy(base):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"Phoenix did not start:\n{(work / 'phoenix.log').read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/healthz", timeout=2) as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError):
        return False


def received(base: str, project: str, conversation: str, count: int, wait: float = 60) -> list[dict[str, Any]]:
    """The spans of `conversation` Phoenix's REST API lists in `project`, once there are `count`."""
    deadline = time.monotonic() + wait
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/v1/projects/{project}/spans?limit=1000", timeout=10) as answer:
                data = json.load(answer)["data"]
        except urllib.error.HTTPError as exc:
            if exc.code != 404:  # 404: no span has reached the project yet
                raise
            data = []
        found = [s for s in data if s["attributes"].get("gen_ai.conversation.id") == conversation]
        if len(found) >= count:
            return sorted(found, key=lambda s: (s["start_time"], s["name"]))
        time.sleep(0.5)
    pytest.fail(f"Phoenix holds {len(found)} of the {count} spans expected in project {project}: {found}")


def _script(folder: Path) -> str:
    turns = [
        turn(call("edit_file", {"path": "app.py", "old_text": f"Howdy {ARGUMENTS[0]}", "new_text": "Hi"}, "c1")),
        turn(call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": f"Hi {ARGUMENTS[1]}"}, "c2")),
        turn(call("run_command", {"command": f"echo {ARGUMENTS[2]} > out.txt"}, "c3")),
        turn(call("finish", {"summary": "greeting changed"}, "c4")),
    ]
    (folder / "script.json").write_text(json.dumps(turns))
    return f"scripted/{folder / 'script.json'}"


@pytest.fixture(scope="module")
def recorded(phoenix: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[str]]:
    """The session, recorded with live export to project `live`: (database, session id, warnings)."""
    folder = tmp_path_factory.mktemp("session")
    repo = folder / "proj"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "app.py").write_text("def greet(name):\n    return 'Hello, ' + name\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.email=dev@example.com", "-c", "user.name=Dev", "commit", "-q", "-m", "initial")
    db = folder / "feedback.db"
    settings = Settings(
        model=_script(folder), approval="auto-edit", repo_map_tokens=0, lessons=False, db=str(db), otlp_endpoint=phoenix
    )
    said: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"{PROJECT}=live")
        store = open_store(db)
        session = open_session(repo, settings)
        recording = attach(session, store, warn=said.append)
        asyncio.run(_drive(session))
        assert recording.close() == []
        store.close()
    return db, session.id, said


async def _drive(session) -> None:
    """The turn, the command denied as a frontend would, then the fixed edit rejected in review."""
    edits: list[EditApplied] = []

    def on_event(event) -> None:
        if isinstance(event, EditApplied):
            edits.append(event)
        if isinstance(event, ApprovalRequested):
            decision = ApprovalDecision(request_id=event.request_id, approved=False, comment="never write files")
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(session.submit(decision)))

    session.subscribe(on_event)
    finished = await session.run(UserInput(text=PROMPT))
    assert finished.reason == "finished"
    await session.submit(ReviewEdit(edit_id=edits[0].edit_id, accepted=False, comment="keep Hello"))
    await session.close()


def export(db: Path, endpoint: str, project: str, *extra: str) -> subprocess.CompletedProcess:
    env = os.environ | {"OTEL_RESOURCE_ATTRIBUTES": f"{PROJECT}={project}"}
    command = [sys.executable, "-m", "cli", "export", "--otlp", endpoint, "--db", str(db), *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)


def verdicts(span: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["attributes"]["gen_ai.evaluation.name"]: e["attributes"] for e in span["events"]}


def test_an_exported_session_is_found_in_phoenix_with_parents_names_and_feedback(phoenix, recorded):
    db, session_id, _ = recorded
    done = export(db, phoenix, "after")
    assert done.returncode == 0, done.stderr
    assert "9 of 9 spans sent" in done.stdout
    assert "took no OTLP log records" in done.stdout  # Phoenix has no /v1/logs: span events only

    spans = received(phoenix, "after", session_id, 9)
    roots = [s for s in spans if s["parent_id"] is None]
    assert [s["name"] for s in roots] == ["invoke_agent teachback"]
    root = roots[0]
    assert root["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert root["attributes"]["gen_ai.usage.input_tokens"] > 0
    children = [s for s in spans if s is not root]
    assert {s["parent_id"] for s in children} == {root["context"]["span_id"]}
    assert {s["context"]["trace_id"] for s in spans} == {root["context"]["trace_id"]}
    chats = [s for s in children if s["attributes"]["gen_ai.operation.name"] == "chat"]
    assert len(chats) == 4 and all(s["name"].startswith("chat scripted/") for s in chats)
    assert all(s["attributes"]["gen_ai.usage.output_tokens"] > 0 for s in chats)
    tools = {s["attributes"]["gen_ai.tool.call.id"]: s for s in children if s["name"].startswith("execute_tool")}
    assert {k: s["attributes"]["gen_ai.tool.name"] for k, s in tools.items()} == {
        "c1": "edit_file",
        "c2": "edit_file",
        "c3": "run_command",
        "c4": "finish",
    }
    assert all(s["attributes"]["gen_ai.operation.name"] == "execute_tool" for s in tools.values())

    failed = tools["c1"]
    assert failed["status_code"] == "ERROR" and failed["attributes"]["error.type"] == "no_match"
    pair = verdicts(failed)["teachback.tool"]
    assert pair["gen_ai.evaluation.score.label"] == "fail"
    assert "not found" in pair["gen_ai.evaluation.explanation"] and pair["teachback.pair.corrected"] is True
    denied = verdicts(tools["c3"])
    assert denied["teachback.approval"]["gen_ai.evaluation.score.label"] == "fail"
    assert denied["teachback.approval"]["gen_ai.evaluation.explanation"] == "never write files"
    assert denied["teachback.user"]["gen_ai.evaluation.score.label"] == "fail"
    review = verdicts(tools["c2"])["teachback.review"]
    assert review["gen_ai.evaluation.score.label"] == "fail" and review["teachback.review.decision"] == "rejected"
    assert review["gen_ai.evaluation.explanation"] == "keep Hello"
    assert verdicts(tools["c4"]) == {}


def test_live_spans_arrive_during_the_session_and_without_content_carry_no_prompt_or_arguments(phoenix, recorded):
    db, session_id, said = recorded
    assert said == []  # nothing dropped, nothing to warn about
    live = received(phoenix, "live", session_id, 9)
    assert [s["name"] for s in live if s["parent_id"] is None] == ["invoke_agent teachback"]
    assert verdicts(next(s for s in live if s["attributes"].get("gen_ai.tool.call.id") == "c1"))["teachback.tool"]

    done = export(db, phoenix, "after-plain")
    assert done.returncode == 0, done.stderr
    plain = received(phoenix, "after-plain", session_id, 9)
    for spans in (live, plain):
        text = json.dumps(spans)
        assert "gen_ai.evaluation.explanation" in text  # the feedback itself does travel
        for secret in ("PROMPTMARK", *ARGUMENTS):
            assert secret not in text
        keys = {key for span in spans for key in span["attributes"]}
        assert not [k for k in keys if k.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.tool.call.arg"))]

    done = export(db, phoenix, "after-content", "--otlp-content")
    assert done.returncode == 0, done.stderr
    text = json.dumps(received(phoenix, "after-content", session_id, 9))
    assert "PROMPTMARK-7f3a" in text and all(argument in text for argument in ARGUMENTS)
