"""Recording that cannot write is loud and loses nothing: a database locked by another process is
waited for and retried, events it holds up are kept and written later, `run --json` prints only
what is committed, and a database that takes no writes stops the run before it acts."""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from feedback_store import Recorder, StoreError, open_store
from tests.conftest import call, turn
from tests.store.events import FakeSession, with_altered_edit

ROOT = Path(__file__).resolve().parents[2]
TEACHBACK = [sys.executable, "-m", "cli"]
HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
print("released", flush=True)
"""


class LockHolder:
    """Another process holding the database's write lock (BEGIN IMMEDIATE) until released."""

    def __init__(self, db: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout.readline().strip() == "locked"

    def release(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
            assert self.proc.stdout.readline().strip() == "released"
            self.proc.wait(timeout=10)


class Run:
    """`teachback run` as a real process, its output lines collected as they come."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [*TEACHBACK, "run", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
        )
        self.stdout: queue.Queue[str] = queue.Queue()
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.stdout.put), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr.append), daemon=True).start()

    @staticmethod
    def _pump(stream, put) -> None:
        for line in stream:
            put(line)

    def lines(self, timeout: float = 30.0) -> list[str]:
        """Every stdout line, once the process has ended."""
        self.proc.wait(timeout=timeout)
        time.sleep(0.2)  # let the pumps drain the pipes
        out = []
        while not self.stdout.empty():
            out.append(self.stdout.get())
        return out

    def wait_stderr(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.stderr):
            assert self.proc.poll() is None or time.monotonic() < deadline, "".join(self.stderr)
            assert time.monotonic() < deadline, f"no {text!r} on stderr: {''.join(self.stderr)}"
            time.sleep(0.05)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)


def recorded_ids(db: Path) -> set[str]:
    with open_store(db) as store:
        return {row["id"] for row in store.query("SELECT id FROM events")}


def printed_ids(lines: list[str]) -> list[str]:
    """Ids of the printed events the store keeps (deltas are streamed, never stored)."""
    events = [json.loads(line) for line in lines if line.strip()]
    return [e["id"] for e in events if e["type"] != "assistant_delta"]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "feedback.db"
    open_store(path).close()  # an existing, current database
    return path


def run_args(git_repo: Path, model: str, db: Path, *extra: str) -> list[str]:
    return [
        "--json",
        "--workspace",
        str(git_repo),
        "--model",
        model,
        "--approval",
        "full-auto",
        "--db",
        str(db),
        *extra,
        "do it",
    ]


def two_steps(script) -> str:
    return script(turn(call("read_file", {"path": "app.py"})), turn(call("finish", {"summary": "read it"})))


# -- the store waits and retries -----------------------------------------------------------------


def test_a_writer_retries_past_the_busy_timeout_until_the_lock_is_released(db, caplog):
    holder = LockHolder(db)
    threading.Timer(2.5, holder.release).start()  # longer than one attempt's busy timeout (1 s)
    store = open_store(db, timeout=20)
    started = time.monotonic()
    with caplog.at_level(logging.INFO, logger="feedback_store.store"):
        with store.write() as conn:
            conn.execute("INSERT INTO flags (id) VALUES ('after-the-lock')")
    assert time.monotonic() - started >= 2.0
    assert any("retrying" in r.getMessage() for r in caplog.records)
    assert store.query("SELECT id FROM flags") == [{"id": "after-the-lock"}]
    store.close()


def test_the_recorder_keeps_what_it_could_not_write_and_writes_it_later(db):
    session = FakeSession().start().user("hi").say("hello").finish()
    store = open_store(db, timeout=0.3)
    errors: list[StoreError] = []
    shown: list[str] = []
    recorder = Recorder(store, then=lambda e: shown.append(e.id), on_error=errors.append)
    recorder(session.events[0])
    assert shown == [session.events[0].id] and recorded_ids(db) == {session.events[0].id}
    holder = LockHolder(db)
    for event in session.events[1:3]:
        recorder(event)
    assert len(errors) == 1 and "locked" in str(errors[0]) and str(db) in str(errors[0])
    assert recorder.flush(wait=0.2) == session.events[1:3]  # still locked: nothing dropped
    holder.release()
    for event in session.events[3:]:
        recorder(event)
    assert recorder.pending == [] and recorder.error is None
    assert recorded_ids(db) == {e.id for e in session.events}
    assert shown == [e.id for e in session.events]  # each shown once, in order
    store.close()


def test_without_on_error_the_failure_is_raised_once_and_nothing_is_dropped(db):
    session = FakeSession().start().user("hi").say("hello").finish()
    store = open_store(db, timeout=0.2)
    recorder = Recorder(store)
    holder = LockHolder(db)
    with pytest.raises(StoreError, match="locked"):
        recorder(session.events[0])
    for event in session.events[1:]:
        recorder(event)  # still failing: kept, not raised again
    holder.release()
    assert recorder.flush() == []
    assert recorded_ids(db) == {e.id for e in session.events}
    store.close()


def record_each(db: Path, events: list) -> tuple[Recorder, list[StoreError]]:
    store = open_store(db)
    errors: list[StoreError] = []
    recorder = Recorder(store, on_error=errors.append)
    for event in events:
        recorder(event)
    store.close()
    return recorder, errors


def test_a_step_the_database_refuses_is_noted_and_keeps_nothing_else_out(db):
    events, twin = with_altered_edit(id="same-edit-id-again")  # the edits table refuses a second row
    recorder, errors = record_each(db, events)
    assert recorder.lost == [] and recorder.pending == [] and errors == []
    assert recorded_ids(db) == {e.id for e in events}  # the twin itself is recorded, with a note
    conn = sqlite3.connect(db)
    notes = conn.execute("SELECT event_id, stage, problem FROM recording_notes").fetchall()
    assert notes == [(twin.id, "edit_applied", "IntegrityError: UNIQUE constraint failed: edits.id")]
    assert conn.execute("SELECT count(*) FROM edits").fetchone()[0] == 1
    conn.close()


def test_an_event_that_cannot_be_written_at_all_does_not_keep_the_others_out(db):
    events, broken = with_altered_edit(id="not-json", before={1, 2})  # a set: the event has no JSON form
    recorder, errors = record_each(db, events)
    assert recorder.lost == [broken] and recorder.pending == []
    assert "refused 1 event(s) (edit_applied)" in str(errors[0])
    assert recorded_ids(db) == {e.id for e in events} - {broken.id}


# -- `teachback run` -----------------------------------------------------------------------------


@pytest.mark.timeout(120)
def test_run_outlasting_a_lock_then_released_records_every_event(git_repo, script, db):
    holder = LockHolder(db)
    try:
        run = Run(*run_args(git_repo, two_steps(script), db), env={"TEACHBACK_DB_WAIT": "2"})
        run.wait_stderr("recording is failing")  # the first write waited 2 s and gave up for now
        assert str(db) in "".join(run.stderr) and "locked" in "".join(run.stderr)
    finally:
        holder.release()
    lines = run.lines()
    assert run.proc.returncode == 0, "".join(run.stderr)
    assert "recording caught up" in "".join(run.stderr)
    ids = printed_ids(lines)
    assert len(ids) >= 6 and set(ids) == recorded_ids(db)


@pytest.mark.timeout(120)
def test_run_whose_recording_never_succeeds_exits_3_naming_the_database(git_repo, script, db):
    holder = LockHolder(db)
    try:
        run = Run(*run_args(git_repo, two_steps(script), db), env={"TEACHBACK_DB_WAIT": "0.5"})
        lines = run.lines(timeout=90)
    finally:
        holder.release()
    stderr = "".join(run.stderr)
    assert run.proc.returncode == 3, stderr
    assert "RECORDING FAILED" in stderr and str(db) in stderr
    assert "Close that program" in stderr and "db_wait" in stderr  # what to do
    assert "Traceback" not in stderr
    assert json.loads(lines[-1])["type"] == "turn_finished"  # the session itself ran and was shown
    assert recorded_ids(db) == set()


@pytest.fixture
def read_only(db: Path):
    """The database made unwritable: the immutable flag as root (chmod does not bind root)."""
    if os.geteuid() == 0:
        made = subprocess.run(["chattr", "+i", str(db)], capture_output=True, text=True)
        if made.returncode != 0:
            pytest.skip(f"running as root and chattr +i is unavailable: {made.stderr.strip()}")
        yield db
        subprocess.run(["chattr", "-i", str(db)], check=True)
    else:
        db.chmod(0o444)
        yield db
        db.chmod(0o644)


def test_run_on_a_read_only_database_stops_before_acting(git_repo, script, read_only):
    model = script(turn(call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Hey"})))
    done = subprocess.run(
        [*TEACHBACK, "run", *run_args(git_repo, model, read_only)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert str(read_only) in done.stderr and "readonly" in done.stderr
    assert "--db" in done.stderr and "--no-record" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""
    assert "Hello" in (git_repo / "app.py").read_text()


# -- `run --json` prints only committed events --------------------------------------------------


def slow_steps(script) -> str:
    return script(
        *[turn(call("run_command", {"command": f"sleep 0.3 && echo step {n}"})) for n in range(6)],
        turn(call("finish", {"summary": "done"})),
    )


@pytest.mark.timeout(180)
@pytest.mark.parametrize("kill_after", [4, 12])
def test_every_printed_event_survives_a_kill(git_repo, script, db, kill_after):
    run = Run(*run_args(git_repo, slow_steps(script), db), env={})
    printed = [run.stdout.get(timeout=60) for _ in range(kill_after)]
    run.kill()  # right after reading a line: anything printed must already be committed
    ids = printed_ids(printed)
    assert len(ids) == kill_after
    assert set(ids) <= recorded_ids(db)


@pytest.mark.timeout(120)
@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc to see the database opened")
def test_nothing_is_printed_while_the_commit_waits(git_repo, script, db):
    holder = LockHolder(db)
    try:
        run = Run(*run_args(git_repo, slow_steps(script), db), env={"TEACHBACK_DB_WAIT": "60"})
        _wait_until_open(run.proc.pid, db)
        time.sleep(2.0)  # the session has started and its first event waits for the lock
        assert run.stdout.empty()
    finally:
        holder.release()
    printed = [run.stdout.get(timeout=60) for _ in range(4)]
    run.kill()
    assert json.loads(printed[0])["type"] == "session_started"
    assert set(printed_ids(printed)) <= recorded_ids(db)


def _wait_until_open(pid: int, db: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(db) for fd in os.listdir(f"/proc/{pid}/fd")):
                return
        except FileNotFoundError:
            pass  # an fd closed while we looked
        time.sleep(0.05)
    raise AssertionError(f"teachback never opened {db}")
