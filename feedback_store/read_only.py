"""Opening the feedback database for commands that only read it (`teachback stats`, `export`).

A store the user may not write (a teammate's on a share, a CI artifact, a file on a read-only file
system) must still be readable, and reading must change nothing: the file is opened with SQLite's
`mode=ro` and every write on the connection is refused. Only a store whose schema is behind and
that the user may write is upgraded, by opening it as every other command does. A WAL database opened
`mode=ro` still needs its `-shm` file, which SQLite cannot create in a folder it may not write; the
file is then opened `immutable=1`, which reads the database file alone.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

import sqlite_utils

from feedback_store.errors import StoreError
from feedback_store.migrations import MIGRATIONS, applied, migrate
from feedback_store.store import DEFAULT_TIMEOUT, Store, explain, not_ours, open_store

log = logging.getLogger(__name__)

# How the file is opened, in order: read-only with the WAL's shared memory, then as a file that
# nothing changes while it is read (no -wal or -shm file needed).
OPEN_MODES = ("mode=ro", "immutable=1")


def open_read_only(path: str | Path, *, timeout: float = DEFAULT_TIMEOUT) -> Store:
    """The feedback database at `path` for reading only. A path with no file yet, or a store whose
    schema this teachback must first set up or upgrade, is opened as `open_store` opens it (which
    writes it) where the file and its folder are writable; where they are not, an empty file reads
    as an empty store and an older schema is refused with what to do."""
    path = Path(path).expanduser()
    if not path.is_file():
        return open_store(path, timeout=timeout)
    conn = _connect(path, timeout)
    try:
        db = sqlite_utils.Database(conn, execute_plugins=False)
        tables = db.table_names()
        if tables and "migrations" not in tables:
            raise not_ours(path)
        missing = [name for name, _ in MIGRATIONS if name not in applied(db)]
    except sqlite3.Error as exc:
        conn.close()
        raise explain(exc, path) from exc
    except StoreError:
        conn.close()
        raise
    if not missing:
        return Store(db, path, wait=timeout)
    conn.close()
    if _writable(path):
        return open_store(path, timeout=timeout)
    if not tables:
        return _empty(path)
    raise _too_old(path, missing)


def _writable(path: Path) -> bool:
    """The file and its folder take writes (access() also answers no for an immutable file and a
    read-only file system)."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _connect(path: Path, timeout: float) -> sqlite3.Connection:
    uri = path.resolve().as_uri()
    for number, mode in enumerate(OPEN_MODES):
        conn = sqlite3.connect(
            f"{uri}?{mode}", uri=True, timeout=timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA query_only = ON")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens the file (and its -shm)
        except sqlite3.Error as exc:
            conn.close()
            if number + 1 < len(OPEN_MODES) and _needs_writable_folder(exc):
                log.info("%s: %s failed (%s); reading the file alone", path, mode, exc)
                continue
            raise explain(exc, path) from exc
        if mode == "immutable=1" and _has_log(path):
            log.warning(
                "%s is read as it was last checkpointed: its -wal file cannot be used without a writable "
                "folder, so commits still in that file are not shown. To see them, copy %s and %s-wal "
                "together into a writable folder and read the copy.",
                path,
                path.name,
                path.name,
            )
        return conn
    raise AssertionError("unreachable: the last mode returns or raises")


def _needs_writable_folder(exc: sqlite3.Error) -> bool:
    """SQLite could not create or set up the WAL's -shm file beside a read-only database."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_CANTOPEN", "SQLITE_READONLY"))


def _has_log(path: Path) -> bool:
    wal = path.with_name(path.name + "-wal")
    try:
        return wal.stat().st_size > 0
    except OSError:
        return False


def _empty(path: Path) -> Store:
    """A store with no rows, for a database file that has no tables yet: there is nothing in it to
    read, and setting its tables up would write it."""
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    db = sqlite_utils.Database(conn, execute_plugins=False)
    migrate(db)
    return Store(db, path)


def _too_old(path: Path, missing: list[str]) -> StoreError:
    return StoreError(
        f"{path} was written by an older teachback (its schema lacks {', '.join(missing)}). This command "
        "only reads, and it cannot upgrade the store: the file or its folder takes no writes. Read a "
        f"copy instead (cp '{path}' feedback-copy.db && chmod u+w feedback-copy.db, then --db "
        "feedback-copy.db: the copy is upgraded when opened), or run teachback doctor --db on the store where it is writable."
    )
