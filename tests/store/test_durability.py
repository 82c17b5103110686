"""A killed writer loses nothing it acknowledged; concurrent writers lose nothing and never lock."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from feedback_store import open_store
from tests.at_once import errors_at_once

ROOT = Path(__file__).resolve().parents[2]


def writer(db: Path, sessions: int, label: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store.writer", str(db), str(sessions), label],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def integrity(db: Path) -> str:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.timeout(90)
def test_sigkill_mid_session_loses_nothing_acknowledged(tmp_path: Path) -> None:
    db = tmp_path / "f.db"
    open_store(db).close()
    proc = writer(db, 0, "killed")
    acknowledged = []
    assert proc.stdout is not None
    while len(acknowledged) < 150:  # several sessions in, then kill it wherever it is
        line = proc.stdout.readline()
        assert line, proc.stderr.read() if proc.stderr else "writer exited"
        acknowledged.append(line.strip())
    proc.send_signal(signal.SIGKILL)
    # The rest through the same buffered reader: readline() may already hold lines that
    # communicate(), reading the pipe underneath it, would never see.
    acknowledged += proc.stdout.read().split()
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert integrity(db) == "ok"
    store = open_store(db)
    recorded = {row["id"] for row in store.query("SELECT id FROM events")}
    assert set(acknowledged) <= recorded
    assert len(recorded) - len(acknowledged) <= 1  # at most the one being written when killed
    for summary in store.list_sessions(limit=100):  # pairs of every recorded session are consistent
        assert summary.pairs <= 4


@pytest.mark.timeout(120)
def test_three_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "f.db"
    sessions = 8
    procs = [writer(db, sessions, f"w{n}") for n in range(3)]
    outputs = [p.communicate(timeout=110) for p in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert "locked" not in err
    acknowledged = [line for out, _ in outputs for line in out.split()]
    store = open_store(db)
    assert store.query("SELECT count(*) AS n FROM events")[0]["n"] == len(acknowledged)
    assert {r["id"] for r in store.query("SELECT id FROM events")} == set(acknowledged)
    assert len(store.list_sessions(limit=100)) == 3 * sessions
    assert store.count_pairs() == 3 * sessions * 4
    assert all(p.correction is not None for p in store.pairs())
    assert integrity(db) == "ok"


def _open_and_close(path: Path) -> None:
    open_store(path, timeout=10).close()


@pytest.mark.timeout(120)
def test_processes_that_create_one_database_at_the_same_moment_all_open_it(tmp_path: Path) -> None:
    """As the parallel attempts of `teachback tasks run` do with a new --db: switching a new file to
    write-ahead logging answers "locked" at once to all but one process unless it is retried."""
    for round_ in range(20):
        path = tmp_path / f"new-{round_}.db"
        assert errors_at_once(_open_and_close, path) == [], f"round {round_}"
        assert integrity(path) == "ok"
