"""SQLite's lock errors and the switch to write-ahead logging, for every database teachback writes
(the feedback store, the repository map's tag cache)."""

from __future__ import annotations

import sqlite3
import time

FIRST_PAUSE, MAX_PAUSE = 0.002, 0.1  # seconds between tries of the WAL switch, doubling


def is_busy(exc: sqlite3.Error) -> bool:
    """Another connection holds the lock (SQLITE_BUSY or SQLITE_LOCKED, extended codes included)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or "locked" in str(exc).lower()


def use_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Switch to write-ahead logging. On a new file that another process is setting up at the same
    moment, the switch answers SQLITE_BUSY at once instead of waiting for the lock (SQLite does not
    call the busy handler there), so it is retried here for up to `timeout` seconds."""
    deadline = time.monotonic() + timeout
    pause = FIRST_PAUSE
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, MAX_PAUSE)
