"""Where a hook's payloads land, with nothing but the standard library: the hook process must add
almost nothing to the time the host agent waits for it, and the store's own modules (sqlite-utils,
the protocol) take longer to import than that allows.

A payload is written to the database's `hook_inbox` table at once when the database is free. When
another process holds the write lock, the database does not exist yet, or it has no inbox yet, the
rows go to a queue instead: one small JSON file each in a folder beside the database, written whole
(a temporary file renamed into place) so a reader never sees half of one. The next hook call that
finds the database free, and every command that opens the store, move the queue into the inbox.
Each row has a unique key, so a file moved twice (a crash between the commit and the unlink) is
inserted once.
"""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
import time
from pathlib import Path

QUEUE_SUFFIX = ".hook-queue"
MAX_QUEUED_FILE = 64 * 1024 * 1024  # a queued file larger than this is no file of ours: left alone


class Row:
    """One inbox row. (Not a dataclass: importing dataclasses costs the hook milliseconds.)"""

    __slots__ = FIELDS = ("agent", "session", "source", "ts", "payload", "key")

    def __init__(self, agent: str, session: str, source: str, ts: float, payload: str, key: str) -> None:
        self.agent = agent
        self.session = session
        self.source = source  # "hook": a payload as it came; "guard": a call teachback denied; "transcript"
        self.ts = ts
        self.payload = payload  # JSON text
        self.key = key

    def fields(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.FIELDS}


_KEYS = itertools.count()


def new_key(prefix: str) -> str:
    """A key no other row has: the time, this process and a counter."""
    return f"{prefix}-{time.time_ns()}-{os.getpid()}-{next(_KEYS)}"


def queue_folder(db: Path) -> Path:
    return db.with_name(db.name + QUEUE_SUFFIX)


def deliver(db: Path, rows: list[Row]) -> sqlite3.Connection | None:
    """Write `rows` (after anything queued) into the inbox now if the database is free; else queue
    them. Never waits for a lock. Returns the connection that wrote them, still open, or None when
    they were queued. Closing the last connection to a WAL database checkpoints it (the log copied
    into the file and synced: tens of milliseconds), so a short-lived writer may leave that to the
    next opener by ending without closing; what it committed is in the log either way."""
    if db.is_file():
        try:
            conn = sqlite3.connect(str(db), timeout=0, isolation_level=None)
        except sqlite3.Error:
            conn = None
        if conn is not None:
            try:
                if _write(conn, db, rows):
                    return conn
            except sqlite3.Error:  # locked by another writer, or unusable: the queue keeps the rows
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            conn.close()
    enqueue(db, rows)
    return None


def _write(conn: sqlite3.Connection, db: Path, rows: list[Row]) -> bool:
    conn.execute("PRAGMA busy_timeout = 0")
    conn.execute("PRAGMA synchronous = NORMAL")  # the file is in WAL mode: a process crash loses nothing
    conn.execute("PRAGMA wal_autocheckpoint = 0")  # checkpoints are the store's work, not a hook's
    conn.execute("BEGIN IMMEDIATE")
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'hook_inbox'").fetchone() is None:
        conn.execute("ROLLBACK")
        return False  # an older schema: the next command that opens the store migrates it
    taken = take_queue(db)
    insert(conn, [row for _, queued in taken for row in queued] + rows)
    conn.execute("COMMIT")
    for path, _ in taken:
        path.unlink(missing_ok=True)
    return True


def insert(conn: sqlite3.Connection, rows: list[Row]) -> None:
    conn.executemany(
        """INSERT OR IGNORE INTO hook_inbox (agent, session, source, ts, payload, key)
           VALUES (?, ?, ?, ?, ?, ?)""",
        [(r.agent, r.session, r.source, r.ts, r.payload, r.key) for r in rows],
    )


def enqueue(db: Path, rows: list[Row]) -> None:
    folder = queue_folder(db)
    folder.mkdir(parents=True, exist_ok=True)
    name = rows[0].key if rows else new_key("q")
    partial = folder / f".{name}.tmp"
    partial.write_text(json.dumps([r.fields() for r in rows]), encoding="utf-8")
    os.replace(partial, folder / f"{name}.json")


def take_queue(db: Path) -> list[tuple[Path, list[Row]]]:
    """The queued rows, oldest file first (a file that is not a list of rows is left where it is)."""
    folder = queue_folder(db)
    if not folder.is_dir():
        return []
    taken = []
    for path in sorted(folder.glob("*.json")):
        try:
            if path.stat().st_size > MAX_QUEUED_FILE:
                continue
            rows = [Row(**fields) for fields in json.loads(path.read_text(encoding="utf-8"))]
        except (OSError, ValueError, TypeError, RecursionError):  # vanished, or not ours: left alone
            continue
        taken.append((path, rows))
    return taken


def queued(db: Path) -> int:
    folder = queue_folder(db)
    return len(list(folder.glob("*.json"))) if folder.is_dir() else 0
