"""Every hostile input of both hardening rounds in one recorded `teachback run`, then an ordinary
failing call, an ordinary call and an answer: the run exits as documented, no traceback reaches the
user, and every event of the session is in the database with the pairs and flags it implies."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agent.test_hostile_inputs import ROUND_ONE
from tests.conftest import call, turn

ROOT = Path(__file__).resolve().parents[2]
SURROGATE = "\ud800"  # a real lone surrogate in the argument text, not an escape

HOSTILE_TURNS = [
    *ROUND_ONE,
    # round two: the session that silenced the recorder, and its class
    turn(
        call("read_file", {"path": "m" * 300}),
        call("create_file", '{"path": "c.py", "content": "' + SURROGATE + '"}'),
        call("list_files", "[" * 100_000),
    ),
    turn(
        call("no_such_tool", "[" * 100_000),
        call("run_command", '{"command": ' + '{"c": ' * 100_000),
        call(SURROGATE * 3, '{"path": "' + SURROGATE + '"}'),
        content="Trying again " + SURROGATE,
    ),
    turn(call("run_command", {"command": "curl -s https://example.com/slug.py"})),  # the monitor still flags
]
ORDINARY = [
    turn(call("read_file", {"path": "missing.py"})),  # an ordinary mistake: a not_found pair
    turn(call("read_file", {"path": "app.py"})),
    turn(content="All done: app.py greets by name."),
]


def uneven(text: str, n: int) -> str:
    """`text` n times with uneven spaces between: litellm stops a stream that repeats one chunk."""
    return "".join(text + " " * (i % 5) for i in range(n))


def hostile_files(root: Path) -> None:
    (root / "huge.js").write_bytes(b"x" * 5_000_000)  # one 5 MB line
    (root / "min.js").write_text("var a=1;" * 375_000)
    (root / "wide.txt").write_text("".join(f"{i:03} " + "y" * 996 + "\n" for i in range(1, 301)))
    (root / "slow.txt").write_text(("a" * 40 + "b\n") * 3)
    (root / "odd.txt").write_text("one\ftwo\u2028three\x1cfour\x85\nfive\u2029\nsix\n")
    os.mkfifo(root / "pipe")


def teachback(*args: str, timeout: float, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env},
    )


@pytest.mark.timeout(300)
def test_every_hostile_input_in_one_session_leaves_every_event_recorded(git_repo, script, tmp_path):
    hostile_files(git_repo)
    db = tmp_path / "feedback.db"
    model = script(*HOSTILE_TURNS, *ORDINARY)
    run = teachback(
        "run", "--json", "--workspace", str(git_repo), "--model", model, "--approval", "full-auto",
        "--max-steps", "40", "--db", str(db), "do it",
        timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]  # answered: the documented exit 0
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    printed = [json.loads(line) for line in run.stdout.split("\n") if line.strip()]  # JSON lines end at \n only
    stored = [p for p in printed if p["type"] != "assistant_delta"]
    calls = sum(len(t["tool_calls"]) for t in HOSTILE_TURNS + ORDINARY)
    assert sum(p["type"] == "tool_call_finished" for p in printed) == calls

    conn = sqlite3.connect(db)
    recorded = {row[0] for row in conn.execute("SELECT id FROM events")}
    assert {p["id"] for p in stored} == recorded  # every event of the session, the last ones too
    types = [row[0] for row in conn.execute("SELECT type FROM events ORDER BY ts, rowid")]
    assert types[-4:] == ["tool_call_finished", "assistant_message", "model_usage", "turn_finished"]
    assert conn.execute("SELECT reason FROM turns").fetchall() == [("answered",)]
    finished = conn.execute("SELECT count(*) FROM tool_calls WHERE status != 'running'").fetchone()[0]
    assert finished == calls

    # The answer, the ordinary call's pair and the monitor's flag are there.
    last = json.loads(conn.execute("SELECT message FROM messages ORDER BY seq DESC LIMIT 1").fetchone()[0])
    assert last == {"role": "assistant", "content": "All done: app.py greets by name."}
    pair = conn.execute("SELECT source, error_kind FROM pairs WHERE target = 'missing.py'").fetchall()
    assert pair == [("tool", "not_found")]
    assert ("fetches_network",) in conn.execute("SELECT rule FROM flags").fetchall()
    schema_pairs = conn.execute("SELECT count(*) FROM pairs WHERE source = 'schema'").fetchone()[0]
    assert schema_pairs >= 10
    all_pairs = conn.execute("SELECT count(*) FROM pairs").fetchone()[0]

    # Nothing failed on the way; only the text SQLite cannot store (the lone surrogates) is noted.
    notes = conn.execute("SELECT stage, problem FROM recording_notes").fetchall()
    assert notes and all(stage == "text" and "stored as U+FFFD" in problem for stage, problem in notes), notes
    replaced = conn.execute("SELECT arguments FROM tool_calls WHERE arguments LIKE '%' || char(65533) || '%'")
    assert len(replaced.fetchall()) >= 2
    conn.close()

    # What was recorded exports and counts, with nothing re-parsed without bounds (the curl call
    # flagged the session, so it is asked for).
    said = {}
    for kind in ("sdpo", "trl-sdpo", "dpo", "sft", "kto"):
        out = tmp_path / f"{kind}.jsonl"
        exported = teachback(
            "export", "--db", str(db), "--format", kind, "--out", str(out), "--include-flagged", timeout=120
        )
        assert "Traceback" not in exported.stderr, exported.stderr[-3000:]
        assert exported.returncode == 0 or kind in ("dpo", "sft", "kto"), exported.stderr[-3000:]
        assert exported.returncode == 0 or "no pair" in exported.stderr.lower(), exported.stderr[-3000:]
        said[kind] = exported.stdout + exported.stderr
    records = [json.loads(line) for line in (tmp_path / "sdpo.jsonl").read_text().split("\n") if line]
    duplicates = re.search(r"Left out: (\d+) duplicates", said["sdpo"])
    assert len(records) + (int(duplicates.group(1)) if duplicates else 0) == all_pairs  # every pair, each once
    stats = teachback("stats", "--db", str(db), timeout=120)
    assert stats.returncode == 0 and "Traceback" not in stats.stderr, stats.stderr[-3000:]


@pytest.mark.timeout(120)
def test_text_mode_hostile_replies_leave_every_event_recorded(git_repo, script, tmp_path):
    db = tmp_path / "feedback.db"
    deep = uneven("[", 5_000)

    def text_call(name, arguments):
        return turn(content=f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>")

    model = script(
        turn(content='<tool_call>\n{"name": "read_file", "arguments": ' + deep + "\n</tool_call>"),
        turn(content=deep),
        text_call("read_file", deep),
        turn(content='<tool_call>\n{"name": "list_files", "arguments": "' + SURROGATE + '"}\n</tool_call>'),
        turn(content="<tool_call>\nread_file(path=" + uneven("-", 30_000) + "1)\n</tool_call>"),  # parser memory
        turn(content="<tool_call>\nread_file(path=" + uneven("(", 30_000) + ")\n</tool_call>"),
        text_call("read_file", {"path": "missing.py"}),
        text_call("read_file", {"path": "app.py"}),
        turn(content="Done."),
    )
    run = teachback(
        "run", "--json", "--workspace", str(git_repo), "--model", model, "--approval", "full-auto",
        "--db", str(db), "--max-steps", "20", "do it",
        timeout=100, TEACHBACK_TOOL_MODE="text",
    )  # fmt: skip
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
    printed = [json.loads(line) for line in run.stdout.split("\n") if line.strip()]  # JSON lines end at \n only
    conn = sqlite3.connect(db)
    recorded = {row[0] for row in conn.execute("SELECT id FROM events")}
    assert {p["id"] for p in printed if p["type"] != "assistant_delta"} == recorded
    assert conn.execute("SELECT reason FROM turns").fetchall() == [("answered",)]
    assert conn.execute("SELECT error_kind FROM pairs WHERE target = 'missing.py'").fetchall() == [("not_found",)]
    conn.close()
