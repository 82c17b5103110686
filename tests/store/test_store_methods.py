"""The store's named methods that other packages call instead of speaking SQL to its tables."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from agent.protocol import ToolCallFinished, ToolCallStarted
from feedback_store import Recorder, StoreError, open_store
from tests.store.events import FakeSession


def failed_grader_run(session: FakeSession) -> list:
    """A task grader's failing test run, recorded at the session's last step (as tasks.rollout does)."""
    call = dict(session_id=session.id, call_id=f"grader_{session.id}", name="run_command", step=session.step_no)
    start = ToolCallStarted(**call, arguments='{"command": "pytest"}')
    return [start, ToolCallFinished(**call, cause_id=start.id, ok=False, result="1 failed", error_kind="exit_status")]


def test_a_marked_task_attempt_reads_back_and_keeps_the_session_config(tmp_path: Path) -> None:
    session = FakeSession().start().user("fix it").say("done").finish()
    with open_store(tmp_path / "f.db") as store:
        Recorder(store).record_many(session.events)
        store.mark_task(session.id, {"instance_id": "demo-1", "attempt": 0, "reward": 0.5})
        store.mark_task(session.id, {"instance_id": "demo-1", "attempt": 1, "reward": 1.0})
        assert store.task_sessions() == {session.id: {"instance_id": "demo-1", "attempt": 1, "reward": 1.0}}
        assert store.query("SELECT json_extract(config, '$.approval') AS a FROM sessions")[0]["a"] == "ask"


def test_clean_replies_are_those_whose_every_call_succeeded_a_graders_run_aside_newest_first(tmp_path: Path) -> None:
    old = FakeSession(ts=1_000.0).start().user("one")
    old.call("read_file", {"path": "a.py"})
    old.finish()
    new = FakeSession(ts=2_000.0).start().user("two").say("just text")
    new.call("read_file", {"path": "gone.py"}, ok=False, error_kind="not_found", result="not found")
    new.call("read_file", {"path": "b.py"})
    new.finish()
    with open_store(tmp_path / "f.db") as store:
        for session in (old, new):
            Recorder(store).record_many([*session.events, *failed_grader_run(session)])
        replies = store.clean_replies()
        seqs = {sid: [seq for s, seq in replies if s == sid] for sid in (old.id, new.id)}
        assert [sid for sid, _ in replies] == [new.id, old.id]
        assert len(seqs[old.id]) == len(seqs[new.id]) == 1
        rows = store.query("SELECT message FROM messages WHERE session_id = ? AND seq = ?", (new.id, seqs[new.id][0]))
        assert '\\"b.py\\"' in rows[0]["message"]


def test_a_write_commits_or_rolls_back_whole_and_frees_the_store_either_way(tmp_path: Path) -> None:
    with open_store(tmp_path / "f.db") as store:
        with store.write() as conn:
            conn.execute("INSERT INTO store_meta (key, value) VALUES ('kept', '1')")
        with pytest.raises(ValueError, match="not this one"), store.write() as conn:
            conn.execute("INSERT INTO store_meta (key, value) VALUES ('dropped', '1')")
            raise ValueError("not this one")
        with pytest.raises(StoreError) as refused, store.write() as conn:
            conn.execute("INSERT INTO store_meta (key, value) VALUES ('dropped too', '1')")
            conn.execute("INSERT INTO store_meta (key, value) VALUES ('kept', '2')")  # the key is taken
        assert isinstance(refused.value.__cause__, sqlite3.IntegrityError)

        def write_from_another_thread() -> None:
            with store.write(wait=5) as conn:
                conn.execute("INSERT INTO store_meta (key, value) VALUES ('thread', '1')")

        other = threading.Thread(target=write_from_another_thread, daemon=True)
        other.start()
        other.join(timeout=10)
        assert not other.is_alive()  # the store's lock was released after each failure
        keys = [row["key"] for row in store.query("SELECT key FROM store_meta WHERE key != 'salt' ORDER BY key")]
        assert keys == ["kept", "thread"]
        assert not store.db.conn.in_transaction
