"""`teachback stats` and `teachback export` read a store they cannot write (a teammate's on a share,
a CI artifact, a read-only file system) and leave it exactly as it was: no migration, no write, no
-wal or -shm file beside it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlite_utils

from cli.entry import main
from feedback_store import Recorder, StoreError, open_store
from feedback_store.export.format_table import FORMATS, TRAJECTORIES
from feedback_store.migrations import MIGRATIONS
from feedback_store.read_only import open_read_only
from tests.store.events import mixed_session

ROOT = Path(__file__).resolve().parents[2]
TEACHBACK = [sys.executable, "-m", "cli"]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def share(tmp_path: Path) -> Path:
    """A folder holding a recorded store, closed as a finished session leaves it (no -wal file)."""
    folder = tmp_path / "share"
    folder.mkdir()
    store = open_store(folder / "team.db")
    Recorder(store).record_many(mixed_session(model="m/one").events)
    store.close()
    assert sorted(p.name for p in folder.iterdir()) == ["team.db"]
    return folder


class Unwritable:
    """The file and its folder made unwritable: chmod for a user; for root, whom chmod does not
    stop, the immutable flag (or the test is skipped where chattr cannot set it)."""

    def __init__(self, *paths: Path) -> None:
        self.paths = paths

    def __enter__(self) -> None:
        if os.geteuid() != 0:
            for path in self.paths:
                path.chmod(0o555 if path.is_dir() else 0o444)
            return
        made = subprocess.run(["chattr", "+i", *map(str, self.paths)], capture_output=True, text=True)
        if made.returncode != 0:
            pytest.skip(f"running as root and chattr +i is unavailable here: {made.stderr.strip()}")

    def __exit__(self, *exc: object) -> None:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", *map(str, self.paths)], check=True)
        else:
            for path in self.paths:
                path.chmod(0o755 if path.is_dir() else 0o644)


@pytest.fixture
def locked(share: Path) -> Iterator[Path]:
    db = share / "team.db"
    with Unwritable(db, share):
        # The store really takes no write here, root included.
        with pytest.raises(StoreError, match="Cannot write"):
            open_store(db).close()
        yield db


def test_stats_reads_a_store_it_cannot_write_and_changes_nothing(locked: Path, capsys) -> None:
    before = digest(locked)
    assert main(["stats", "--db", str(locked), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["sessions"] == 1 and stats["tool_calls"] == 9 and stats["call_errors"] == 2
    assert digest(locked) == before
    assert sorted(p.name for p in locked.parent.iterdir()) == ["team.db"]


@pytest.mark.parametrize("fmt", [*FORMATS, TRAJECTORIES.kind])
def test_every_export_format_reads_a_store_it_cannot_write(locked: Path, tmp_path: Path, fmt: str, capsys) -> None:
    before = digest(locked)
    out = tmp_path / "out" / f"records{FORMATS[fmt].suffix if fmt in FORMATS else '.jsonl'}"
    assert main(["export", "--db", str(locked), "--format", fmt, "--out", str(out)]) == 0, capsys.readouterr().err
    assert out.stat().st_size > 0
    assert digest(locked) == before
    assert sorted(p.name for p in locked.parent.iterdir()) == ["team.db"]


def test_a_store_on_a_read_only_file_system(share: Path, tmp_path: Path) -> None:
    """The folder mounted read-only (in a private mount namespace): SQLite can create no -shm file,
    so the store is read as an immutable file."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("a read-only bind mount needs root and unshare")
    db = share / "team.db"
    before = digest(db)
    mount = 'mount --bind -o ro "$0" "$0" && { ! touch "$0/probe" 2>/dev/null; } && exec "$@"'
    tried = subprocess.run(["unshare", "-m", "sh", "-c", mount, str(share), "true"], capture_output=True, text=True)
    if tried.returncode != 0:
        pytest.skip(f"no read-only bind mount here: {tried.stderr.strip()}")
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", mount, str(share), *TEACHBACK, "stats", "--db", str(db), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sessions"] == 1
    assert digest(db) == before and sorted(p.name for p in share.iterdir()) == ["team.db"]


def test_writes_on_a_read_only_store_are_refused(share: Path) -> None:
    db = share / "team.db"
    before = digest(db)
    with open_read_only(db) as store:
        assert store.stats()["sessions"] == 1
        with pytest.raises(StoreError, match="Cannot write"):
            store.check_writable()
    assert digest(db) == before


def older_store(path: Path) -> Path:
    """A store as the first schema left it."""
    old = sqlite_utils.Database(path)
    old.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at REAL)")
    name, migration = MIGRATIONS[0]
    migration(old)
    old.execute("INSERT INTO migrations VALUES (?, 0)", (name,))
    old.conn.commit()
    old.close()
    return path


def test_an_older_store_it_cannot_write_is_refused_with_what_to_do(share: Path, capsys) -> None:
    db = older_store(share / "old.db")
    before = digest(db)
    with Unwritable(db, share):
        assert main(["stats", "--db", str(db)]) == 1
        assert main(["export", "--db", str(db), "--format", "sdpo", "--out", str(share.parent / "o.jsonl")]) == 1
    err = capsys.readouterr().err
    assert err.count("older teachback") == 2 and MIGRATIONS[-1][0] in err and "chmod u+w" in err
    assert "Traceback" not in err
    assert digest(db) == before
    # Where it may be written, a store command upgrades it, as it always has.
    assert main(["stats", "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sessions"] == 0
    assert digest(db) != before


def test_an_empty_file_it_cannot_write_reads_as_an_empty_store(share: Path, capsys) -> None:
    db = share / "empty.db"
    db.touch()
    with Unwritable(db, share):
        assert main(["stats", "--db", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sessions"] == 0
    assert db.read_bytes() == b""


def test_a_log_file_it_cannot_use_is_named_with_what_to_do(tmp_path: Path, caplog, capsys) -> None:
    """A copy of a store taken while it was open: its -wal file holds the commits, and with no -shm
    beside it in a folder that takes no writes, only the database file can be read."""
    live, artifact = tmp_path / "live", tmp_path / "artifact"
    live.mkdir()
    artifact.mkdir()
    store = open_store(live / "f.db")
    store.db.conn.execute("PRAGMA wal_autocheckpoint = 0")
    Recorder(store).record_many(mixed_session().events)
    for name in ("f.db", "f.db-wal"):
        shutil.copy(live / name, artifact / name)
    store.close()
    with Unwritable(artifact / "f.db", artifact / "f.db-wal", artifact):
        assert main(["stats", "--db", str(artifact / "f.db"), "--json"]) == 0
    assert "commits still in that file are not shown" in caplog.text and "f.db-wal" in caplog.text
    assert sorted(p.name for p in artifact.iterdir()) == ["f.db", "f.db-wal"]
