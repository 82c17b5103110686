"""The tag cache: one SQLite file under $TEACHBACK_HOME, shared by every session and repository.

`tags` holds extracted tags keyed by content hash and query fingerprint, so identical content is
parsed once wherever it appears; `files` remembers, per repository root, each file's size, mtime
and content hash, so an unchanged file is recognised without reading it. `graphs` keeps the
latest ranking graph of each root, keyed by a hash of every file's content (its state), and `maps`
the latest rendered maps of each root, keyed by focus and budget and by the state or by a hash of
every file's size and mtime (its listing), so a new process finds the map of unchanged files
without rebuilding it. The file is a cache: a version change drops and rebuilds it, and a database error degrades to
re-parsing, never to a failed map.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from common.sqlite import use_wal

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2
MAPS_PER_ROOT = 64  # rendered maps kept per repository root (focus and budget vary)
# The code that decides which files are read and how their graph and map are built (the tags
# queries too, below): a change to any of it makes every stored graph and map a miss.
MAP_CODE = (
    ("agent", "languages.py"),
    ("agent.repomap", "excluded-paths.txt"),
    ("agent.repomap", "files.py"),
    ("agent.repomap", "rank.py"),
    ("agent.repomap", "render.py"),
    ("agent.repomap", "repomap.py"),
    ("agent.repomap", "tags.py"),
)
_TABLES = {
    "tags": (
        "CREATE TABLE tags (content_hash TEXT NOT NULL, query TEXT NOT NULL,"
        " tags TEXT NOT NULL, PRIMARY KEY (content_hash, query)) WITHOUT ROWID"
    ),
    "files": (
        "CREATE TABLE files (root TEXT NOT NULL, path TEXT NOT NULL,"
        " size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, content_hash TEXT NOT NULL,"
        " query TEXT NOT NULL, PRIMARY KEY (root, path)) WITHOUT ROWID"
    ),
    "graphs": "CREATE TABLE graphs (root TEXT PRIMARY KEY, state TEXT NOT NULL, data BLOB NOT NULL)",
    "maps": (
        "CREATE TABLE maps (key TEXT PRIMARY KEY, root TEXT NOT NULL, stored_ns INTEGER NOT NULL, text TEXT NOT NULL)"
    ),
}


@functools.cache
def code_fingerprint() -> str:
    digest = hashlib.sha1()
    for package, name in MAP_CODE:
        digest.update(resources.files(package).joinpath(name).read_bytes())
    queries = resources.files("agent.queries")
    for name in sorted(entry.name for entry in queries.iterdir() if entry.name.endswith(".scm")):
        digest.update(queries.joinpath(name).read_bytes())
    return digest.hexdigest()


def content_hash(data: bytes) -> str:
    return "sha1:" + hashlib.sha1(data).hexdigest()


def listing_key(root: str, listing: Iterable[tuple[str, int, int]]) -> str:
    """Names what a root's files look like from outside: every (path, size, mtime_ns)."""
    return _digest("listing", root, (f"{path}\0{size}\0{mtime_ns}" for path, size, mtime_ns in listing))


def state_key(files: Iterable[tuple[str, str, str]]) -> str:
    """Names what a root's files contain: every (path, content hash, query fingerprint)."""
    return _digest("state", "", ("\0".join(file) for file in files))


def map_key(base: str, request: str) -> str:
    """Names a map: the listing or state key of its files, and its focus and budget."""
    return "map:" + hashlib.sha1(f"{base}\n{request}".encode()).hexdigest()


def _digest(kind: str, root: str, lines: Iterable[str]) -> str:
    digest = hashlib.sha1(f"{code_fingerprint()}\0{root}\n".encode("utf-8", "surrogateescape"))
    for line in lines:
        digest.update(line.encode("utf-8", "surrogateescape") + b"\n")
    return f"{kind}:{digest.hexdigest()}"


@dataclass(frozen=True, slots=True)
class FileRow:
    path: str
    size: int
    mtime_ns: int
    content_hash: str
    query: str
    tags: str | None  # tags JSON to store; None: already stored, or not read (load_root)


WAIT_S = 5.0  # how long a cache write waits for another process's


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
            db = sqlite3.connect(self.path, timeout=WAIT_S, isolation_level=None, check_same_thread=False)
            use_wal(db, WAIT_S)  # a parallel task attempt or a second editor may be creating it too
            db.execute("PRAGMA synchronous=NORMAL")
            if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                db.execute("BEGIN IMMEDIATE")
                # Checked again under the lock: another process may have just made the tables.
                if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                    for name, statement in _TABLES.items():
                        db.execute(f"DROP TABLE IF EXISTS {name}")
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
        """Every remembered file of `root` (without tags: see `root_tags`)."""
        db = self._connect()
        if db is None:
            return []
        try:
            rows = db.execute(
                "SELECT path, size, mtime_ns, content_hash, query FROM files WHERE root = ?", (root,)
            ).fetchall()
        except sqlite3.Error as exc:
            log.warning("repo map cache read failed (%s); re-parsing", exc)
            return []
        return [FileRow(*row, None) for row in rows]

    def root_tags(self, root: str) -> dict[tuple[str, str], str]:
        """Cached tags JSON of every remembered file of `root`, by (content_hash, query)."""
        db = self._connect()
        if db is None:
            return {}
        try:
            rows = db.execute(
                "SELECT t.content_hash, t.query, t.tags FROM files f JOIN tags t"
                " ON t.content_hash = f.content_hash AND t.query = f.query WHERE f.root = ?",
                (root,),
            ).fetchall()
        except sqlite3.Error as exc:
            log.warning("repo map cache read failed (%s); re-parsing", exc)
            return {}
        return {(digest, query): text for digest, query, text in rows}

    def get_tags(self, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
        """Cached tags JSON for (content_hash, query) keys; missing keys are absent."""
        db = self._connect()
        found: dict[tuple[str, str], str] = {}
        if db is None:
            return found
        try:
            for key in keys:
                row = db.execute("SELECT tags FROM tags WHERE content_hash = ? AND query = ?", key).fetchone()
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

    def load_graph(self, root: str, state: str) -> bytes | None:
        """The ranking graph stored for `root` when its content was `state`."""
        row = self._read_one("SELECT data FROM graphs WHERE root = ? AND state = ?", (root, state))
        return None if row is None else bytes(row[0])

    def store_graph(self, root: str, state: str, data: bytes) -> None:
        """Keep `data` as the graph of `root` (one per root: the latest replaces the last)."""
        self._write([("INSERT OR REPLACE INTO graphs (root, state, data) VALUES (?, ?, ?)", (root, state, data))])

    def load_map(self, key: str) -> str | None:
        """The map rendered for `key` (content, focus and budget), if stored."""
        row = self._read_one("SELECT text FROM maps WHERE key = ?", (key,))
        return None if row is None else row[0]

    def store_map(self, root: str, keys: Iterable[str], text: str) -> None:
        """Keep the map `text` under each of `keys`, and the latest MAPS_PER_ROOT maps of `root`."""
        now = time.time_ns()
        self._write(
            [
                *(
                    (
                        "INSERT OR REPLACE INTO maps (key, root, stored_ns, text) VALUES (?, ?, ?, ?)",
                        (key, root, now, text),
                    )
                    for key in keys
                ),
                (
                    "DELETE FROM maps WHERE root = ? AND key NOT IN (SELECT key FROM maps WHERE root = ?"
                    " ORDER BY stored_ns DESC LIMIT ?)",
                    (root, root, MAPS_PER_ROOT),
                ),
            ]
        )

    def _read_one(self, sql: str, args: tuple[object, ...]) -> tuple | None:
        db = self._connect()
        if db is None:
            return None
        try:
            return db.execute(sql, args).fetchone()
        except sqlite3.Error as exc:
            log.warning("repo map cache read failed (%s); building the map again", exc)
            return None

    def _write(self, statements: list[tuple[str, tuple[object, ...]]]) -> None:
        db = self._connect()
        if db is None:
            return
        try:
            db.execute("BEGIN IMMEDIATE")
            for sql, args in statements:
                db.execute(sql, args)
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            log.warning("repo map cache write failed (%s); the next process builds the map again", exc)
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
