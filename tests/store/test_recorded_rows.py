"""Every row the recorder writes, table by table, for sessions with every kind of event: the same as
the snapshot in data/recorded_rows.json, on the live path and in one batch. How events are recorded
may change; what is stored may not (exports, merges and older readers read these rows)."""

from __future__ import annotations

import dataclasses
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

from agent.protocol import (
    AssistantMessage,
    EditApplied,
    Event,
    ToolCallFinished,
    ToolCallStarted,
    event_from_dict,
)
from feedback_store import Recorder, open_store
from feedback_store.team import provenance
from tests.store.events import FakeSession, edit

SNAPSHOT = Path(__file__).parent / "data" / "recorded_rows.json"
CODE = "def handler(request):\n    return render(request, 'index.html', {'items': items})\n" * 6
# Derived or per-store tables: the migrations log, the store's salt, the full-text index's own pages.
LEFT_OUT = {"migrations", "store_meta", "pair_search", "pair_search_data", "pair_search_idx", "pair_search_docsize"}
LEFT_OUT |= {"pair_search_config"}


def bench_steps(s: FakeSession, steps: int) -> None:
    """Steps shaped as the recorder bench's: ~1 KB messages, an edit that fails then one that works."""
    for step in range(steps):
        ok = step % 2 == 1
        args = {"path": "app.py", "old_text": CODE[:200], "new_text": CODE[:210]}
        s.call(
            "edit_file",
            args,
            ok=ok,
            target="app.py",
            error_kind=None if ok else "no_match",
            result="Edited app.py." if ok else "old_text was not found in app.py. Closest lines:\n" + CODE[:300],
            edits=[edit("app.py", CODE + str(step - 1), CODE + str(step))] if ok else [],
        )


def first_session() -> FakeSession:
    s = FakeSession(session_id="session-a").start(system="You are a coding agent. " * 40).user("Fix the handler")
    bench_steps(s, 4)
    s.call("open_file", {"path": "app.py"}, ok=False, error_kind="unknown_tool", result="No tool open_file.")
    s.call(
        "read_file",
        {"path": "tests/test_app.py"},
        target="tests/test_app.py",
        result="assert greet('hello') == 'hello'\n",
    )
    s.call("read_file", {"path": "nope.py"}, ok=False, error_kind="not_found", target="nope.py", result="No nope.py")
    s.call("read_file", {"path": "app.py"}, target="app.py", result=CODE)
    s.call("run_command", {"command": "pytest -q"}, ok=False, error_kind="exit_status", target="pytest -q")
    broke = edit("app.py", "x = 1\n", "x = (\n", syntax_error="app.py:1: '(' was never closed")
    s.call("edit_file", {"path": "app.py"}, target="app.py", edits=[broke], result="app.py:1: '(' was never closed")
    s.call("edit_file", {"path": "app.py"}, target="app.py", edits=[edit("app.py", "x = (\n", "x = 1\n")])
    s.call("run_command", {"command": "pytest -q"}, target="pytest -q", result="1 passed")
    hard_coded = edit("app.py", "def greet():\n", "def greet():\n    if name == 'hello':\n        return 'hello'\n")
    hard_coded["diff"] = "+    if name == 'hello':\n+        return 'hello'\n"
    s.call("edit_file", {"path": "app.py"}, target="app.py", edits=[hard_coded])
    skipped = edit("tests/test_app.py", "def test_a():\n", "@pytest.mark.skip\ndef test_a():\n")
    s.call("edit_file", {"path": "tests/test_app.py"}, target="tests/test_app.py", edits=[skipped])
    s.call("run_command", {"command": "curl -s https://example.com/slug.py"}, target="curl")
    s.call("run_command", {"command": "rm -rf build"}, ok=False, error_kind="denied", denied_by_user="Not that.")
    s.call("run_command", {"command": "rm -rf build"}, ok=False, error_kind="denied", result="Denied by policy.")
    s.call("read_file", {"path": "a.py"}, ok=False, error_kind="repeated_call", result="Same call again.")
    s.say("partly \ud800 broken")
    s.finish()
    s.user("Now the docs")
    for step in range(6):  # a schema failure whose fix comes after its window: left uncorrected
        if step == 0:
            s.call("edit_file", "{not json", ok=False, error_kind="malformed_json", result="Bad JSON.")
        else:
            s.say(f"Thinking {step}.")
    s.call("read_file", {"path": "README.md"}, target="README.md", result="# Docs\n")
    return s.finish()


def second_session() -> FakeSession:
    """A session interleaved with the first, with reviews, rendered prompts and a resume."""
    s = FakeSession(session_id="session-b", ts=1_750_000_000.5).start().user("Rename things")
    first = edit("lib.py", "a = 1\n", "b = 1\n", edit_id="edit-rejected")
    s.call("edit_file", {"path": "lib.py"}, target="lib.py", edits=[first])
    second = edit("lib.py", "b = 1\n", "c = 1\n", edit_id="edit-corrected")
    s.call("edit_file", {"path": "lib.py"}, target="lib.py", edits=[second])
    s.review("edit-rejected", "lib.py", "rejected", comment="Keep a.")
    s.review("edit-corrected", "lib.py", "corrected", user_content="d = 1\n" + CODE)
    s.call("edit_file", {"path": "big.py"}, target="big.py", edits=[edit("big.py", CODE * 2, CODE * 3, edit_id="big")])
    s.say("Rendered.")
    s.usage(
        s.events[-1].id,
        prompt_tokens=1200,
        completion_tokens=3,
        cost_usd=0.0,
        latency_ms=10.0,
        logprobs=[{"token": f"t{i}", "logprob": -0.5} for i in range(40)],
        tool_mode="text",
        rendered_messages=[{"role": "system", "content": "Tools: " * 100}, {"role": "user", "content": "go"}],
        prompt_token_ids=list(range(1200)),
        completion_token_ids=[1, 2, 3],
    )
    odd = dataclasses.replace(s.events[-1], id="usage-with-a-dict", prompt_tokens={"n": 1})  # no model_calls row
    s.events.append(odd)
    s.events.append(dataclasses.replace(odd, id="usage-with-a-surrogate", prompt_tokens=5, model="gpt-\udc80"))
    s.events.append(  # a call skipped by an interrupt: finished without starting
        ToolCallFinished(
            session_id=s.id,
            ts=s._when(),
            call_id="call_skipped",
            name="run_command",
            ok=False,
            result="Interrupted.",
            step=s.step_no,
            error_kind="interrupted",
        )
    )
    s.finish()
    resumed = FakeSession(session_id="session-b", ts=s.ts).start()
    resumed.turn_no, resumed.step_no = s.turn_no, s.step_no
    resumed.user("Carry on")
    resumed.call("read_file", {"path": "lib.py"}, target="lib.py", result="d = 1\n")
    s.events += resumed.finish().events
    return s


def deterministic(events: list[Event]) -> list[Event]:
    """The events with their generated ids replaced, in order of appearance, by fixed ones."""
    names: dict[str, str] = {}

    def fixed(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0), f"{len(names) + 1:032x}")

    text = re.sub(r"\b[0-9a-f]{32}\b", fixed, json.dumps([e.to_dict() for e in events]))
    return [event_from_dict(data) for data in json.loads(text)]


def session_log() -> list[Event]:
    a, b = first_session().events, second_session().events
    merged = sorted(a + b, key=lambda e: e.ts)  # two sessions recorded at once
    events = deterministic(merged)
    edit_event = next(e for e in events if isinstance(e, EditApplied))
    broken = dataclasses.replace(edit_event, id="edit-without-diff", edit_id="e2", diff=None)
    twin = dataclasses.replace(edit_event, id="same-edit-again")
    at = events.index(edit_event) + 1
    return [*events[:at], broken, twin, *events[at:]]


def dump(path: Path) -> dict[str, list[dict[str, Any]]]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    tables = {}
    for name in names:
        if name in LEFT_OUT:
            continue
        rows = [dict(row) for row in conn.execute(f"SELECT * FROM {name} ORDER BY rowid")]  # noqa: S608
        for row in rows:
            if name == "sessions":  # salted per store, and this install's version
                row["author"] = row["author"] and "<author>"
                if row["agent_version"] == provenance.teachback_version():
                    row["agent_version"] = "<teachback version>"
        tables[name] = rows
    conn.close()
    return tables


def recorded_live(path: Path, events: list[Event]) -> None:
    store = open_store(path)
    recorder = Recorder(store, on_error=lambda error: None)
    for event in events:
        recorder(event)
    store.close()


def recorded_at_once(path: Path, events: list[Event]) -> None:
    store = open_store(path)
    Recorder(store).record_many(events)
    store.close()


def snapshot() -> dict[str, list[dict[str, Any]]]:
    return json.loads(SNAPSHOT.read_text(encoding="utf-8"))


def test_the_log_exercises_every_kind_of_row(tmp_path: Path) -> None:
    events = session_log()
    recorded_live(tmp_path / "f.db", events)
    tables = dump(tmp_path / "f.db")
    for name in ("events", "messages", "tool_calls", "edits", "model_calls", "pairs", "flags", "approvals"):
        assert tables[name], name
    sources = {row["source"] for row in tables["pairs"]}
    assert sources == {"schema", "tool", "lint", "test", "user", "monitor"}
    assert any(row["correction_seq"] is not None for row in tables["pairs"])
    stages = {row["stage"] for row in tables["recording_notes"]}
    assert stages == {"monitor", "edit_applied", "text", "model_usage"}
    assert {row["kind"] for row in tables["blobs"]} >= {"system_prompt", "tools", "file", "rendered_message"}
    large = [e for e in events if isinstance(e, EditApplied) and len(e.before or "") >= 512]
    assert large and next(r for r in tables["edits"] if r["id"] == large[0].edit_id)["before_hash"]


def test_live_recording_writes_the_snapshot_rows(tmp_path: Path) -> None:
    recorded_live(tmp_path / "f.db", session_log())
    assert dump(tmp_path / "f.db") == snapshot()


def test_recording_in_one_batch_writes_the_snapshot_rows(tmp_path: Path) -> None:
    recorded_at_once(tmp_path / "f.db", session_log())
    assert dump(tmp_path / "f.db") == snapshot()


def test_a_second_recorder_carries_on_a_session_the_first_began(tmp_path: Path) -> None:
    """A recorder started after a crash (or in another process) finds the open pairs in the database."""
    events = session_log()
    half = next(i for i, e in enumerate(events) if isinstance(e, ToolCallStarted) and e.call_id == "call_12")
    recorded_live(tmp_path / "f.db", events[:half])
    recorded_live(tmp_path / "f.db", events[half:])
    assert dump(tmp_path / "f.db") == snapshot()


def test_the_snapshot_is_of_this_log() -> None:
    events = session_log()
    stored = snapshot()
    assert [row["id"] for row in stored["events"]] == [e.id for e in events]
    assert sum(isinstance(e, AssistantMessage) for e in events) == sum(
        row["role"] == "assistant" for row in stored["messages"]
    )
