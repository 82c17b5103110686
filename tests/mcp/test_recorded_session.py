"""A recorded `teachback run` whose scripted model calls tools of two real MCP servers (the probe
server written with the official library, and the published mcp-server-time): each way a server
tool can fail is a tool error the model reads, each failure followed by a fixed call is a pair whose
correction is that call, and the export's tools are the MCP schemas the model saw."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import call, turn

ROOT = Path(__file__).resolve().parents[2]

BAD_TYPE = call("mcp__probe__divide", {"a": "six", "b": 3})  # refused by the schema check
ERROR_ANSWER = call("mcp__probe__divide", {"a": 6, "b": 0})  # the server answers isError
DIVIDED = call("mcp__probe__divide", {"a": 6, "b": 3})
TOO_SLOW = call("mcp__probe__slow", {"seconds": 30})  # the call timeout is 2 s
QUICK = call("mcp__probe__slow", {"seconds": 0})
CRASH = call("mcp__probe__crash", {"when": "now"})  # the server's process exits mid-call
SURVIVES = call("mcp__probe__crash", {"when": "later"})  # the server, started again, answers
NO_ZONE = call("mcp__time__get_current_time", {"timezone": "Mars/Olympus_Mons"})
PARIS = call("mcp__time__get_current_time", {"timezone": "Europe/Paris"})
MISSING = call("mcp__time__convert_time", {"source_timezone": "UTC", "time": "12:00"})
CONVERTED = call(
    "mcp__time__convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
)
PICTURE = call("mcp__probe__picture", {})
CALLS = [BAD_TYPE, ERROR_ANSWER, DIVIDED, TOO_SLOW, QUICK, CRASH, SURVIVES, NO_ZONE, PARIS, MISSING, CONVERTED, PICTURE]
EXPECTED = [
    ("mcp__probe__divide", "bad_arguments"),
    ("mcp__probe__divide", "failed"),
    ("mcp__probe__divide", None),
    ("mcp__probe__slow", "timeout"),
    ("mcp__probe__slow", None),
    ("mcp__probe__crash", "crashed"),
    ("mcp__probe__crash", None),
    ("mcp__time__get_current_time", "failed"),
    ("mcp__time__get_current_time", None),
    ("mcp__time__convert_time", "bad_arguments"),
    ("mcp__time__convert_time", None),
    ("mcp__probe__picture", None),
]


def teachback(*args: str, home: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "TEACHBACK_HOME": str(home)},
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory):
    """One recorded session (module-wide: its servers start once), its printed events, its database."""
    tmp = tmp_path_factory.mktemp("mcp-session")
    home, workspace = tmp / "home", tmp / "ws"
    home.mkdir()
    workspace.mkdir()
    (workspace / "notes.txt").write_text("nothing here\n")
    from tests.mcp.conftest import PROBE, TIME_SERVER, server_table

    assert TIME_SERVER.exists(), "mcp-server-time is not installed: pip install -e '.[dev]' (or make test)"
    (home / "teachback.toml").write_text(
        server_table("probe", sys.executable, [str(PROBE)], call_timeout=2)
        + server_table("time", str(TIME_SERVER), ["--local-timezone", "UTC"])
    )
    script = tmp / "script.json"
    script.write_text(json.dumps([*(turn(c) for c in CALLS), turn(content="Done: 6 / 3 = 2.")]))
    db, out = tmp / "feedback.db", tmp / "sdpo.jsonl"
    clock = time.monotonic()
    run = teachback(
        "run", "--json", "--workspace", str(workspace), "--model", f"scripted/{script}",
        "--approval", "full-auto", "--db", str(db), "use the tools",
        home=home, timeout=180,
    )  # fmt: skip
    seconds = time.monotonic() - clock
    exported = teachback("export", "--db", str(db), "--format", "sdpo", "--out", str(out), home=home, timeout=120)
    events = [json.loads(line) for line in run.stdout.split("\n") if line.strip()]
    return {"run": run, "seconds": seconds, "events": events, "db": db, "exported": exported, "out": out}


@pytest.mark.timeout(300)
def test_each_kind_of_mcp_failure_is_a_tool_error_and_the_turn_goes_on(recorded):
    run = recorded["run"]
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    finished = [e for e in recorded["events"] if e["type"] == "tool_call_finished"]
    assert [(e["name"], e["error_kind"]) for e in finished] == EXPECTED
    assert all(e["ok"] == (e["error_kind"] is None) for e in finished)
    results = [e["result"] for e in finished]
    # What the model read, for each failure: what went wrong and what to send instead.
    assert "'a': 'six' is not of type 'integer'" in results[0]
    assert "Expected: mcp__probe__divide(a: integer, b: integer)" in results[0]
    assert "b must not be zero" in results[1] and "the MCP server probe answered" in results[1]
    assert results[2] == "6 / 3 = 2"
    assert "did not answer within 2 s" in results[3]
    assert "stopped during this mcp__probe__crash call" in results[5]
    assert "probe: exiting mid-call as asked" in results[5]  # the server's last words on stderr
    assert results[6] == "still running (later)"  # started again after the crash
    assert "No time zone found with key Mars/Olympus_Mons" in results[7]
    assert '"timezone": "Europe/Paris"' in results[8]
    assert "'target_timezone' is a required property" in results[9]
    assert '"timezone": "Asia/Tokyo"' in results[10]
    assert results[11] == "[image: image/png, 8 bytes; not shown to you]\na one-pixel test image"
    # The 30 s call did not hold the turn: it was abandoned at its 2 s timeout.
    assert recorded["seconds"] < 60
    assert recorded["events"][-1]["type"] == "turn_finished" and recorded["events"][-1]["reason"] == "answered"


@pytest.mark.timeout(300)
def test_a_failed_mcp_call_and_the_fixed_one_make_a_pair_whose_correction_is_the_fix(recorded):
    conn = sqlite3.connect(recorded["db"])
    conn.row_factory = sqlite3.Row
    pairs = conn.execute(
        "SELECT p.tool, p.error_kind, p.source, p.correction_event_id, e.json AS fix FROM pairs p "
        "LEFT JOIN events e ON e.id = p.correction_event_id ORDER BY p.completion_seq"
    ).fetchall()
    calls = conn.execute("SELECT name, status FROM tool_calls ORDER BY rowid").fetchall()
    conn.close()
    assert [(c["name"], c["status"]) for c in calls][:3] == [
        ("mcp__probe__divide", "error"),
        ("mcp__probe__divide", "error"),
        ("mcp__probe__divide", "ok"),
    ]
    assert [(p["tool"], p["error_kind"], p["source"]) for p in pairs] == [
        ("mcp__probe__divide", "bad_arguments", "schema"),
        ("mcp__probe__divide", "failed", "tool"),
        ("mcp__probe__slow", "timeout", "tool"),
        ("mcp__probe__crash", "crashed", "tool"),
        ("mcp__time__get_current_time", "failed", "tool"),
        ("mcp__time__convert_time", "bad_arguments", "schema"),
    ]
    fixes = [json.loads(p["fix"]) for p in pairs]
    assert all(f["ok"] for f in fixes), fixes
    started = {e["call_id"]: e for e in recorded["events"] if e["type"] == "tool_call_started"}
    fixing_calls = [(started[f["call_id"]]["name"], started[f["call_id"]]["args"]) for f in fixes]
    assert fixing_calls == [
        ("mcp__probe__divide", {"a": 6, "b": 3}),
        ("mcp__probe__divide", {"a": 6, "b": 3}),
        ("mcp__probe__slow", {"seconds": 0}),
        ("mcp__probe__crash", {"when": "later"}),
        ("mcp__time__get_current_time", {"timezone": "Europe/Paris"}),
        ("mcp__time__convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
    ]


@pytest.mark.timeout(300)
def test_the_export_carries_the_mcp_schemas_and_the_fixed_call_as_the_correction(recorded):
    exported = recorded["exported"]
    assert exported.returncode == 0, exported.stderr[-3000:]
    records = [json.loads(line) for line in recorded["out"].read_text().split("\n") if line]
    assert len(records) == 6
    tools = {t["function"]["name"]: t["function"] for t in records[0]["tools"]}
    assert {
        "mcp__probe__divide",
        "mcp__probe__slow",
        "mcp__probe__crash",
        "mcp__probe__picture",
        "mcp__time__get_current_time",
        "mcp__time__convert_time",
        "read_file",
    } <= set(tools)
    divide = tools["mcp__probe__divide"]
    assert divide["description"] == "Divide a by b and give the quotient."
    assert divide["parameters"]["properties"]["a"]["type"] == "integer"
    assert divide["parameters"]["required"] == ["a", "b"]
    assert tools["mcp__time__convert_time"]["parameters"]["required"] == ["source_timezone", "time", "target_timezone"]
    by_kind = {(r["completion"]["tool_calls"][0]["function"]["name"], r["feedback"][:30]): r for r in records}
    assert len(by_kind) == 6
    for record in records:
        chosen = record["chosen"]["tool_calls"][0]["function"]
        failed = record["completion"]["tool_calls"][0]["function"]
        assert chosen["name"] == failed["name"]  # the same tool, called as it worked
        assert chosen["arguments"] != failed["arguments"]
    crash = next(r for r in records if r["completion"]["tool_calls"][0]["function"]["name"] == "mcp__probe__crash")
    assert crash["chosen"]["tool_calls"][0]["function"]["arguments"] in ({"when": "later"}, '{"when": "later"}')
