"""The tag cache: one SQLite file under $TEACHBACK_HOME, shared by every session and repository.

`tags` holds extracted tags keyed by content hash and query fingerprint, so identical content is
parsed once wherever it appears; `files` remembers, per repository root, each file's size, mtime
and content hash, so an unchanged file is recognised without reading it. The file is a cache: a
version change drops and rebuilds it, and a database error degrades to re-parsing, never to a
failed map.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
_SCHEMA = (
    (
        "CREATE TABLE IF NOT EXISTS tags (content_hash TEXT NOT NULL, query TEXT NOT NULL,"
        " tags TEXT NOT NULL, PRIMARY KEY (content_hash, query)) WITHOUT ROWID"
    ),
    (
        "CREATE TABLE IF NOT EXISTS files (root TEXT NOT NULL, path TEXT NOT NULL,"
        " size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, content_hash TEXT NOT NULL,"
        " query TEXT NOT NULL, PRIMARY KEY (root, path)) WITHOUT ROWID"
    ),
)


@dataclass(frozen=True, slots=True)
class FileRow:
    path: str
    size: int
    mtime_ns: int
    content_hash: str
    query: str
    tags: str | None  # the cached tags JSON, None when not (or no longer) cached


class TagCache:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._broken = False

    def _connect(self) -> sqlite3.Connection | None:
        if self._db is not None or self._broken:
            return self._db
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=5.0, isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                db.execute("BEGIN IMMEDIATE")
                db.execute("DROP TABLE IF EXISTS tags")
                db.execute("DROP TABLE IF EXISTS files")
                for statement in _SCHEMA:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                db.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            log.warning("repo map cache %s unusable (%s); parsing without it", self.path, exc)
            self._broken = True
            return None
        self._db = db
        return db

    def load_root(self, root: str) -> list[FileRow]:
        """Every remembered file of `root`, with its cached tags when present."""
        db = self._connect()
        if db is None:
            return []
        try:
            rows = db.execute(
                "SELECT f.path, f.size, f.mtime_ns, f.content_hash, f.query, t.tags FROM files f"
                " LEFT JOIN tags t ON t.content_hash = f.content_hash AND t.query = f.query"
                " WHERE f.root = ?", (root,),
            ).fetchall()
        except sqlite3.Error as exc:
            log.warning("repo map cache read failed (%s); re-parsing", exc)
            return []
        return [FileRow(*row) for row in rows]

    def get_tags(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """Cached tags JSON for (content_hash, query) keys; missing keys are absent."""
        db = self._connect()
        found: dict[tuple[str, str], str] = {}
        if db is None:
            return found
        try:
            for key in keys:
                row = db.execute(
                    "SELECT tags FROM tags WHERE content_hash = ? AND query = ?", key
                ).fetchone()
                if row is not None:
                    found[key] = row[0]
        except sqlite3.Error as exc:
            log.warning("repo map cache read failed (%s); re-parsing", exc)
        return found

    def store(self, root: str | None, files: Iterable[FileRow], removed: Iterable[str] = ()) -> None:
        """Remember `files` of `root` (and their tags when set) and forget `removed` paths."""
        db = self._connect()
        if db is None:
            return
        files, removed = list(files), list(removed)
        if not files and not removed:
            return
        try:
            db.execute("BEGIN IMMEDIATE")
            db.executemany(
                "INSERT OR REPLACE INTO tags (content_hash, query, tags) VALUES (?, ?, ?)",
                [(f.content_hash, f.query, f.tags) for f in files if f.tags is not None],
            )
            if root is not None:
                db.executemany(
                    "INSERT OR REPLACE INTO files (root, path, size, mtime_ns, content_hash, query)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    [(root, f.path, f.size, f.mtime_ns, f.content_hash, f.query) for f in files],
                )
                db.executemany("DELETE FROM files WHERE root = ? AND path = ?", [(root, p) for p in removed])
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            log.warning("repo map cache write failed (%s); tags stay in memory only", exc)
            if db.in_transaction:
                db.execute("ROLLBACK")

    def prune(self) -> None:
        """Forget tags of content that no remembered file has any more (older versions), once
        they outnumber the remembered files two to one."""
        db = self._connect()
        if db is None:
            return
        try:
            tags = db.execute("SELECT count(*) FROM tags").fetchone()[0]
            files = db.execute("SELECT count(*) FROM files").fetchone()[0]
            if tags > 2 * files + 100:
                db.execute("BEGIN IMMEDIATE")
                db.execute(
                    "DELETE FROM tags WHERE NOT EXISTS (SELECT 1 FROM files f"
                    " WHERE f.content_hash = tags.content_hash AND f.query = tags.query)"
                )
                db.execute("COMMIT")
        except sqlite3.Error as exc:
            log.warning("repo map cache pruning failed (%s)", exc)
            if db.in_transaction:
                db.execute("ROLLBACK")

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
