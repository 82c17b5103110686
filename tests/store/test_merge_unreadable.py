"""`teachback merge` from a source that is not a feedback store: text, a truncated store, a zeroed
one, another program's SQLite database, a missing file. The source is named with what is wrong with
it, the team store is left exactly as it was (and whole), and the exit status says a source was not
merged; `--skip-unreadable` merges the others."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from feedback_store import open_store
from feedback_store.importers import claude, codex
from feedback_store.importers.imports import import_logs

LOGS = Path(__file__).parent / "data" / "agent_logs"


def teachback(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TEACHBACK_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, env=env, timeout=120)


def store_of(db: Path, module) -> Path:
    with open_store(db) as store:
        files = module.find_files(LOGS / module.AGENT)
        import_logs(store, module.AGENT, files, lambda p: module.read(p, lambda _: None))
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the whole store in its one file, as a copy would be
    conn.close()
    return db


def contents(db: Path) -> tuple[str, list[str]]:
    conn = sqlite3.connect(db)
    check = conn.execute("PRAGMA integrity_check").fetchone()[0]
    dump = list(conn.iterdump())
    conn.close()
    return check, dump


@pytest.fixture()
def stores(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A team store already merged from one member's store, and a second member's store."""
    alice = store_of(tmp_path / "alice.db", claude)
    bob = store_of(tmp_path / "bob.db", codex)
    team = tmp_path / "team.db"
    done = teachback("merge", str(alice), "--into", str(team), home=tmp_path)
    assert done.returncode == 0, done.stderr
    return alice, bob, team


def unreadable(kind: str, tmp_path: Path, good: Path) -> tuple[Path, str]:
    """A source of `kind` and the words its message must hold."""
    path = tmp_path / f"{kind}.db"
    data = good.read_bytes()
    if kind == "text":
        path.write_text("name,email\nalice,alice@example.com\n")
        return path, "it is not an SQLite database"
    if kind == "truncated":
        path.write_bytes(data[: len(data) // 2])
        return path, f"it is truncated: {len(data) // 2:,} bytes where its header counts {len(data):,}"
    if kind == "zeroed":
        path.write_bytes(bytes(len(data)))
        return path, "it holds only zero bytes where an SQLite database begins"
    if kind == "other-sqlite":
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE notes (body TEXT)")
        conn.commit()
        conn.close()
        return path, "it is an SQLite database but not a teachback feedback database"
    return path, "no such file"  # missing


@pytest.mark.parametrize("kind", ["text", "truncated", "zeroed", "other-sqlite", "missing"])
def test_an_unreadable_source_is_named_and_the_team_store_is_left_as_it_was(
    stores: tuple[Path, Path, Path], tmp_path: Path, kind: str
) -> None:
    alice, bob, team = stores
    before = contents(team)
    assert before[0] == "ok"
    bad, said = unreadable(kind, tmp_path, alice)

    done = teachback("merge", str(bob), str(bad), "--into", str(team), home=tmp_path)

    assert done.returncode == 2, done.stdout
    assert f"Cannot merge 1 store(s): {bad}: {said}" in done.stderr, done.stderr
    assert "Nothing was merged" in done.stderr and "--skip-unreadable" in done.stderr
    assert "Traceback" not in done.stderr
    assert contents(team) == before  # integrity_check ok, every row as it was: bob's store was not merged either


def test_nothing_is_created_when_every_source_is_unreadable(tmp_path: Path) -> None:
    bad = tmp_path / "notes.db"
    bad.write_text("not a database")
    team = tmp_path / "team.db"
    done = teachback("merge", str(bad), "--into", str(team), home=tmp_path)
    assert done.returncode == 2
    assert str(bad) in done.stderr and "Traceback" not in done.stderr
    assert not team.exists()


def test_skip_unreadable_merges_the_others_and_still_exits_non_zero(
    stores: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    alice, bob, team = stores
    zeroed, _ = unreadable("zeroed", tmp_path, alice)
    truncated, _ = unreadable("truncated", tmp_path, alice)
    done = teachback(
        "merge", str(zeroed), str(bob), str(truncated), "--into", str(team), "--skip-unreadable", home=tmp_path
    )
    assert done.returncode == 1, done.stderr
    assert "Merged 1 store(s)" in done.stdout
    assert f"left out {zeroed}: it holds only zero bytes" in done.stderr
    assert f"left out {truncated}: it is truncated" in done.stderr
    assert "Traceback" not in done.stderr
    conn = sqlite3.connect(team)
    agents = {r[0] for r in conn.execute("SELECT DISTINCT agent FROM sessions")}
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    assert agents == {"claude-code", "codex"}  # alice's from before, bob's now


def test_a_store_of_another_shape_fails_half_way_and_adds_nothing(
    stores: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """Tables named like a feedback store's, but not one: the check lets it through, the copy finds
    out, and the transaction it ran in is rolled back."""
    _, bob, team = stores
    before = contents(team)
    odd = tmp_path / "odd.db"
    conn = sqlite3.connect(odd)
    conn.executescript(
        """CREATE TABLE migrations (name TEXT);
           CREATE TABLE sessions (id TEXT, repository TEXT, workspace TEXT);
           INSERT INTO sessions VALUES ('s-odd', NULL, NULL);
           CREATE TABLE events (what TEXT);"""
    )
    conn.commit()
    conn.close()
    done = teachback("merge", str(bob), str(odd), "--into", str(team), home=tmp_path)
    assert done.returncode == 2, done.stdout
    assert f"{odd}: its events table has no session_id column" in done.stderr, done.stderr
    assert f"The store(s) merged before it ({bob}) stay merged; nothing of it was added" in done.stderr
    assert "Traceback" not in done.stderr
    check, dump = contents(team)
    assert check == "ok" and len(dump) > len(before[1])  # bob's rows, and none of odd's
    assert not any("s-odd" in line for line in dump)
