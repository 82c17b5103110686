"""`teachback merge A.db B.db ... --into team.db`: many people's stores as one.

Every row keeps its id (session ids are unique per recording, and an imported session's id is the
one its own agent gave it), so the same session from two stores is one session, and merging the
same stores again, in any order, gives the same team store. Provenance (the agent, its version,
the author hash, the repository's identity) is copied with each session; where two stores hold one
session, what one knows fills what the other lacks. Each session's share state, as its own store
decides it (sharing.resolve), is written into the team store as a session setting, so
`export --shared-only` there needs none of the developers' folders. The source files are only read.

A source that cannot be read (missing, not SQLite, truncated, zeroed, another program's database) is
named with what is wrong with it, and the team store is left as it was: every source is checked before
the team store is opened, and each source is copied in one transaction, so one that fails half-way
adds nothing. With `skip_unreadable` the others are merged and the report names the ones left out.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from feedback_store.errors import StoreError
from feedback_store.store import Store, open_store
from feedback_store.team.sharing import resolve

# Copied in this order (pairs after the calls their search index reads), each by its primary key;
# then the blobs these rows name, and no others (an unshared session's file contents stay behind).
TABLES = (
    "sessions",
    "events",
    "messages",
    "turns",
    "model_calls",
    "tool_calls",
    "edits",
    "approvals",
    "flags",
    "pairs",
    "recording_notes",
)
# Where a row already exists, a later copy fills the columns it lacks (a pair corrected since).
FILLED = {
    "sessions": ("agent", "agent_version", "author", "repository", "git_head", "title", "model"),
    "pairs": ("correction_seq", "correction_event_id", "correction_call_id", "corrected_at", "correction"),
}
BATCH = 2000
BLOB_KEY = re.compile(r"sha256:[0-9a-f]{64}")
SQLITE_HEADER = b"SQLite format 3\x00"
T = TypeVar("T")


class UnreadableSource(StoreError):
    """A source store that cannot be merged; the message names it and says what is wrong."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path, self.why = path, why


@dataclass
class MergeReport:
    sources: int = 0  # sources merged
    sessions: dict[str, int] = field(default_factory=dict)  # source -> sessions read
    added: dict[str, int] = field(default_factory=dict)  # table -> rows added
    left_out: int = 0  # sessions not shared (--shared-only)
    unreadable: list[UnreadableSource] = field(default_factory=list)  # sources skipped (skip_unreadable)


def merge(
    sources: list[str | Path], into: str | Path, *, shared_only: bool = False, skip_unreadable: bool = False
) -> MergeReport:
    """Merge `sources` into the store `into`. A source that cannot be read raises StoreError naming
    each such source before anything is written, unless `skip_unreadable` (then it is reported)."""
    target = Path(into).expanduser()
    paths = sorted({Path(p).expanduser() for p in sources}, key=str)
    for path in paths:
        if path.exists() and path.resolve() == target.resolve():
            raise StoreError(f"{path} is the store merged into; give --into another file.")
    report = MergeReport()
    for path in paths:
        why = source_problem(path)
        if why is not None:
            report.unreadable.append(UnreadableSource(path, why))
    if report.unreadable and not skip_unreadable:
        raise StoreError(_refusal(report.unreadable, merged=[]))
    bad = {u.path for u in report.unreadable}
    merged: list[Path] = []
    with open_store(target) as team:
        for path in [p for p in paths if p not in bad]:
            try:
                _merge_one(team, path, report, shared_only)
            except UnreadableSource as exc:  # damage the check did not reach: this source added nothing
                if not skip_unreadable:
                    raise StoreError(_refusal([exc], merged)) from exc
                report.unreadable.append(exc)
                continue
            merged.append(path)
    report.sources = len(merged)
    return report


def _refusal(unreadable: list[UnreadableSource], merged: list[Path]) -> str:
    done = (
        f"The store(s) merged before it ({', '.join(map(str, merged))}) stay merged; nothing of it was added. "
        if merged
        else "Nothing was merged. "
    )
    return (
        f"Cannot merge {len(unreadable)} store(s): "
        + " ".join(str(u) for u in unreadable)
        + f" {done}Give the right file, or pass --skip-unreadable to merge the other stores without it."
    )


def source_problem(path: Path) -> str | None:
    """What makes `path` unmergeable, in words, or None when it reads as a whole teachback store."""
    if not path.exists():
        return "no such file. Check the path given to teachback merge."
    if not path.is_file():
        return "not a regular file, so not a feedback database."
    try:
        with path.open("rb") as handle:
            head = handle.read(100)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})."
    if head and not head.startswith(SQLITE_HEADER):
        if not head.strip(b"\x00"):
            return "it holds only zero bytes where an SQLite database begins (the file was zeroed or never written)."
        return "it is not an SQLite database (it does not begin with the SQLite header), so not a feedback database."
    try:
        source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return f"cannot be opened ({exc})."
    try:
        names = {r[0] for r in source.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "migrations" not in names or "sessions" not in names:
            return "it is an SQLite database but not a teachback feedback database; teachback merge reads only those."
        found = [r[0] for r in source.execute("PRAGMA quick_check(5)")]
    except sqlite3.DatabaseError as exc:
        return _damaged(path, head, str(exc))
    finally:
        source.close()
    return None if found == ["ok"] else _damaged(path, head, "; ".join(found))


def _damaged(path: Path, head: bytes, detail: str) -> str:
    """A damaged source in words: truncated when it is shorter than its header says, else damaged."""
    if len(head) == 100:
        page_size = int.from_bytes(head[16:18], "big")
        pages = int.from_bytes(head[28:32], "big")
        size = path.stat().st_size
        expected = (65536 if page_size == 1 else page_size) * pages
        if size < expected:
            return f"it is truncated: {size:,} bytes where its header counts {expected:,} ({detail})."
    return f"the database is damaged ({detail}). Restore it from a backup, or leave it out."


def _merge_one(team: Store, path: Path, report: MergeReport, shared_only: bool) -> None:
    try:
        source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise UnreadableSource(path, f"cannot be opened ({exc}).") from exc
    try:
        names = {r[0] for r in _reading(path, source.execute, "SELECT name FROM sqlite_master WHERE type = 'table'")}

        def query(sql: str, params: tuple = ()) -> list[dict[str, Any]]:
            cursor = _reading(path, source.execute, sql, params)
            columns = [d[0] for d in cursor.description]
            return [dict(zip(columns, row, strict=True)) for row in _reading(path, cursor.fetchall)]

        shares = resolve(query)
        keep = sorted(sid for sid, share in shares.items() if share.shared or not shared_only)
        added: dict[str, int] = {}  # counted into the report once the source's transaction committed
        with team.write() as conn:
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS merging (id TEXT PRIMARY KEY)")
            conn.execute("DELETE FROM merging")
            conn.executemany("INSERT INTO merging (id) VALUES (?)", [(s,) for s in keep])
            named: set[str] = set()
            for table in TABLES:
                if table in names:
                    added[table] = _copy(conn, source, path, table, named)
            added["blobs"] = _copy_blobs(conn, source, path, named)
            for sid in keep:
                share = shares[sid]
                conn.execute(
                    """INSERT INTO share_settings (scope, key, shared, reason, set_at) VALUES ('session', ?, ?, ?, NULL)
                       ON CONFLICT (scope, key) DO UPDATE SET shared = max(shared, excluded.shared),
                       reason = CASE WHEN excluded.shared > shared THEN excluded.reason ELSE reason END""",
                    (sid, int(share.shared), share.reason),
                )
    finally:
        source.close()
    report.left_out += len(shares) - len(keep)
    report.sessions[str(path)] = len(keep)
    for table, count in added.items():
        report.added[table] = report.added.get(table, 0) + count


def _reading(path: Path, call: Callable[..., T], *args: Any) -> T:
    """A read of the source store: its failure names the source (the team store's own failures are
    explained by the store, naming the team store)."""
    try:
        return call(*args)
    except sqlite3.DatabaseError as exc:
        raise UnreadableSource(path, f"reading it failed half-way ({exc}); the database is damaged.") from exc


def _copy(conn: sqlite3.Connection, source: sqlite3.Connection, path: Path, table: str, named: set[str]) -> int:
    """Copy `table`'s rows of the sessions being merged, by key; add the blob keys they name to
    `named`. Return how many rows were new."""
    mine = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    theirs = {r[1] for r in _reading(path, source.execute, f"PRAGMA table_info({table})")}
    columns = [c for c in mine if c in theirs]
    owner_column = "id" if table == "sessions" else "session_id"
    if owner_column not in columns:  # a table of that name, but not a teachback store's
        raise UnreadableSource(
            path, f"its {table} table has no {owner_column} column, so it is not a teachback feedback database."
        )
    keys = [r[1] for r in sorted(conn.execute(f"PRAGMA table_info({table})"), key=lambda r: r[5]) if r[5]]
    kept = {r[0] for r in conn.execute("SELECT id FROM merging")}
    filled = [c for c in FILLED.get(table, ()) if c in columns]
    on_conflict = (
        f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET "
        + ", ".join(f"{c} = coalesce({table}.{c}, excluded.{c})" for c in filled)
        if filled
        else "ON CONFLICT DO NOTHING"
    )
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))}) {on_conflict}"
    before = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    cursor = _reading(
        path, source.execute, f"SELECT {', '.join(columns)} FROM {table} ORDER BY {', '.join(keys) or 'rowid'}"
    )
    owner = columns.index(owner_column)
    while rows := _reading(path, cursor.fetchmany, BATCH):
        rows = [r for r in rows if r[owner] in kept]
        for row in rows:
            named.update(key for value in row if isinstance(value, str) for key in BLOB_KEY.findall(value))
        try:
            conn.executemany(sql, rows)
        except sqlite3.IntegrityError as exc:  # the source's rows, not the team store, are at fault
            raise UnreadableSource(path, f"its {table} rows do not fit a teachback store ({exc}).") from exc
    return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] - before


def _copy_blobs(conn: sqlite3.Connection, source: sqlite3.Connection, path: Path, named: set[str]) -> int:
    before = conn.execute("SELECT count(*) FROM blobs").fetchone()[0]
    wanted = sorted(named)
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        cursor = _reading(
            path,
            source.execute,
            f"SELECT hash, kind, size, content FROM blobs WHERE hash IN ({', '.join('?' * len(chunk))})",
            chunk,
        )
        rows = _reading(path, cursor.fetchall)
        conn.executemany("INSERT OR IGNORE INTO blobs (hash, kind, size, content) VALUES (?, ?, ?, ?)", rows)
    return conn.execute("SELECT count(*) FROM blobs").fetchone()[0] - before
