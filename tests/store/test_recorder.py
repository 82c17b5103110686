"""The recorder writes every event as it comes, idempotently, and keeps enough to rebuild the
conversation at any turn."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from agent.protocol import AssistantDelta, conversation_from_events, event_from_dict
from feedback_store import Recorder, StoreError, open_store
from tests.store.events import TOOLS, FakeSession, edit, mixed_session


def record(store, events) -> None:
    recorder = Recorder(store)
    for event in events:
        recorder(event)


def count(store, table: str) -> int:
    return store.query(f"SELECT count(*) AS n FROM {table}")[0]["n"]


def test_conversation_is_exactly_what_was_sent(tmp_path: Path) -> None:
    session = mixed_session()
    store = open_store(tmp_path / "f.db")
    record(store, session.events)
    expected, tools = conversation_from_events(session.events)
    assert store.conversation(session.id) == expected
    pair = store.pairs()[0]
    assert pair.tools == tools == TOOLS


def test_replaying_a_log_writes_no_duplicates(tmp_path: Path) -> None:
    session = mixed_session()
    store = open_store(tmp_path / "f.db")
    record(store, session.events)
    before = {
        t: count(store, t) for t in ("events", "messages", "tool_calls", "edits", "pairs", "blobs", "model_calls")
    }
    record(store, session.events)
    Recorder(store).record_many(session.events)
    after = {t: count(store, t) for t in before}
    assert after == before
    assert before["events"] == len(session.events)
    assert before["pairs"] == 4


def test_deltas_are_not_stored_but_everything_else_is(tmp_path: Path) -> None:
    session = FakeSession().start().user("hi")
    session.events.append(AssistantDelta(session_id=session.id, text="he"))
    session.say("hello").finish()
    store = open_store(tmp_path / "f.db")
    record(store, session.events)
    types = [e["type"] for e in store.events(session.id)]
    assert types == ["session_started", "turn_started", "assistant_message", "turn_finished"]
    assert [event_from_dict(e) for e in store.events(session.id)] == [
        e for e in session.events if not isinstance(e, AssistantDelta)
    ]


def test_model_calls_tool_calls_and_edits_are_kept(tmp_path: Path) -> None:
    session = mixed_session(model="anthropic/claude-test")
    store = open_store(tmp_path / "f.db")
    record(store, session.events)
    calls = store.query("SELECT * FROM model_calls ORDER BY ts")
    assert len(calls) == 9 and calls[0]["model"] == "anthropic/claude-test"
    assert json.loads(calls[0]["logprobs"]) == [{"token": "x", "logprob": -0.1}]
    tools = store.query("SELECT * FROM tool_calls ORDER BY started_at")
    assert [t["status"] for t in tools].count("error") == 3
    first = tools[0]
    assert first["name"] == "edit_file" and first["error_kind"] == "no_match" and first["target"] == "app.py"
    assert json.loads(first["arguments"]) == {"path": "app.py", "old_text": "Hi"}
    assert first["result"].startswith("old_text was not found") and first["duration_ms"] == 3.0
    edits = store.query("SELECT * FROM edits ORDER BY ts")
    assert len(edits) == 3
    assert edits[0]["before_hash"].startswith("sha256:")
    assert edits[1]["before_hash"] == edits[0]["after_hash"]  # one snapshot, stored once
    assert edits[1]["syntax_error"] == "app.py:1: '(' was never closed"
    assert store.blob(edits[2]["after_hash"]) == "print('Hello, world')\n"
    session_row = store.query("SELECT * FROM sessions")[0]
    assert store.blob(session_row["system_prompt_hash"]) == "You are a careful coding agent."
    assert json.loads(session_row["config"]) == {"approval": "ask"} and session_row["git_head"] == "abc123"


def test_system_prompts_and_tool_schemas_are_stored_once(tmp_path: Path) -> None:
    store = open_store(tmp_path / "f.db")
    for _ in range(3):
        record(store, FakeSession().start().user("hi").say("hello").finish().events)
    kinds = store.query("SELECT kind, count(*) AS n FROM blobs GROUP BY kind ORDER BY kind")
    assert kinds == [{"kind": "system_prompt", "n": 1}, {"kind": "tools", "n": 1}]
    assert count(store, "sessions") == 3


def test_sessions_list_newest_first_with_counts(tmp_path: Path) -> None:
    store = open_store(tmp_path / "f.db")
    old = mixed_session()
    new = FakeSession(ts=old.ts + 100).start().user("Second task\nwith details").say("ok").finish()
    record(store, old.events + new.events)
    listed = store.list_sessions()
    assert [s.id for s in listed] == [new.id, old.id]
    assert listed[0].title == "Second task" and listed[0].turns == 1 and listed[0].pairs == 0
    assert listed[1]["pairs"] == 4 and listed[1].model == "openai/gpt-test" and listed[1].frontend == "test"
    assert len(store.list_sessions(limit=1)) == 1


def test_a_resumed_session_continues_its_conversation(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    first = FakeSession().start().user("one").say("first answer").finish()
    store = open_store(path)
    record(store, first.events)
    history = store.conversation(first.id)
    store.close()
    # A session resumed with that history emits no SessionStarted; a new recorder picks it up.
    resumed = FakeSession(session_id=first.id, ts=first.ts)
    resumed.turn_no = 1
    resumed.user("two").say("second answer").finish()
    store = open_store(path)
    record(store, resumed.events)
    assert store.conversation(first.id) == history + [
        {"role": "user", "content": "two"},
        {"role": "assistant", "content": "second answer"},
    ]
    assert store.list_sessions()[0].turns == 2


def test_unknown_session_is_a_clear_error(tmp_path: Path) -> None:
    store = open_store(tmp_path / "f.db")
    try:
        store.conversation("nope")
    except StoreError as exc:
        assert "No session 'nope'" in str(exc)
    else:
        raise AssertionError("expected StoreError")


def test_large_texts_are_stored_once_by_hash_and_the_log_comes_back_exactly(tmp_path: Path) -> None:
    big_file = "".join(f"line {i}: {'x' * 40}\n" for i in range(400))
    output = "".join(f"test_{i} PASSED\n" for i in range(300))
    system = "You are a careful coding agent. " * 40
    session = FakeSession().start(system=system).user("edit it")
    session.call("edit_file", {"path": "big.py"}, target="big.py", edits=[edit("big.py", big_file, big_file + "end\n")])
    session.call("run_command", {"command": "pytest"}, ok=False, error_kind="exit_status", result=output)
    # A value shaped like the store's own markers, from a model or a tool, comes back as it was.
    session.call("read_file", {"path": "m.json"}, result='{"$text": "sha256:0"}')
    session.events.append(dataclasses.replace(session.events[-1], id="odd", message={"$text": "sha256:0"}))
    session.finish()
    store = open_store(tmp_path / "f.db")
    record(store, session.events)

    assert [event_from_dict(e) for e in store.events(session.id)] == session.events
    rows = store.query("SELECT json FROM events")
    for text in (big_file, output, system, json.dumps(TOOLS)[:200]):
        assert not any(text[:200] in row["json"] for row in rows)
    blobs = store.query("SELECT hash, content FROM blobs")
    for text in (big_file, output, system):
        assert sum(row["content"] == text for row in blobs) == 1  # one row, shared by every table
    assert (
        store.query("SELECT count(*) AS n FROM sessions WHERE system_prompt_hash IN (SELECT hash FROM blobs)")[0]["n"]
        == 1
    )
    assert sum(len(row["json"]) for row in rows) < len(big_file)  # the log itself is small


def test_an_event_that_records_cleanly_takes_no_savepoint_and_a_failing_one_is_redone_step_by_step(
    tmp_path: Path,
) -> None:
    store = open_store(tmp_path / "f.db")
    statements: list[str] = []
    store.db.conn.set_trace_callback(statements.append)
    session = mixed_session()
    record(store, session.events)
    stored = [e for e in session.events if not isinstance(e, AssistantDelta)]
    assert not [s for s in statements if s.startswith("SAVEPOINT")]
    assert statements.count("COMMIT") == len(stored)
    # An edit without its diff fails the monitor's check: the write is rolled back and done again
    # with a savepoint per event and step, the check's failure noted and the edit's own row kept.
    statements.clear()
    broken = next(e for e in stored if e.type == "edit_applied")
    record(store, [dataclasses.replace(broken, id="edit-without-diff", edit_id="e-new", diff=None)])
    assert statements.count("ROLLBACK") == 1 and "SAVEPOINT recorder_step" in statements
    assert store.query("SELECT stage FROM recording_notes WHERE event_id = 'edit-without-diff'") == [
        {"stage": "monitor"}
    ]
    assert count(store, "edits") == sum(e.type == "edit_applied" for e in stored) + 1
