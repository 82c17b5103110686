"""`teachback merge A.db B.db ... --into team.db`: many people's stores as one.

Every row keeps its id (session ids are unique per recording, and an imported session's id is the
one its own agent gave it), so the same session from two stores is one session, and merging the
same stores again, in any order, gives the same team store. Provenance (the agent, its version,
the author hash, the repository's identity) is copied with each session; where two stores hold one
session, what one knows fills what the other lacks. Each session's share state, as its own store
decides it (sharing.resolve), is written into the team store as a session setting, so
`export --shared-only` there needs none of the developers' folders. The source files are only read.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from feedback_store.errors import StoreError
from feedback_store.sharing import resolve
from feedback_store.store import Store, explain, open_store

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


@dataclass
class MergeReport:
    sources: int = 0
    sessions: dict[str, int] = field(default_factory=dict)  # source -> sessions read
    added: dict[str, int] = field(default_factory=dict)  # table -> rows added
    left_out: int = 0  # sessions not shared (--shared-only)


def merge(sources: list[str | Path], into: str | Path, *, shared_only: bool = False) -> MergeReport:
    target = Path(into).expanduser()
    paths = [Path(p).expanduser() for p in sources]
    for path in paths:
        if not path.is_file():
            raise StoreError(f"No feedback database at {path}. Check the path given to teachback merge.")
        if path.resolve() == target.resolve():
            raise StoreError(f"{path} is the store merged into; give --into another file.")
    report = MergeReport(sources=len(paths))
    with open_store(target) as team:
        for path in sorted(paths, key=lambda p: str(p)):
            _merge_one(team, path, report, shared_only)
    return report


def _merge_one(team: Store, path: Path, report: MergeReport, shared_only: bool) -> None:
    try:
        source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise explain(exc, path) from exc
    try:
        names = {r[0] for r in source.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "migrations" not in names or "sessions" not in names:
            raise StoreError(f"{path} is not a teachback feedback database; teachback merge reads only those.")

        def query(sql: str, params: tuple = ()) -> list[dict[str, Any]]:
            cursor = source.execute(sql, params)
            columns = [d[0] for d in cursor.description]
            return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]

        shares = resolve(query)
        keep = sorted(sid for sid, share in shares.items() if share.shared or not shared_only)
        report.left_out += len(shares) - len(keep)
        report.sessions[str(path)] = len(keep)
        with team.write() as conn:
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS merging (id TEXT PRIMARY KEY)")
            conn.execute("DELETE FROM merging")
            conn.executemany("INSERT INTO merging (id) VALUES (?)", [(s,) for s in keep])
            named: set[str] = set()
            for table in TABLES:
                if table in names:
                    report.added[table] = report.added.get(table, 0) + _copy(conn, source, table, named)
            report.added["blobs"] = report.added.get("blobs", 0) + _copy_blobs(conn, source, named)
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


def _copy(conn: sqlite3.Connection, source: sqlite3.Connection, table: str, named: set[str]) -> int:
    """Copy `table`'s rows of the sessions being merged, by key; add the blob keys they name to
    `named`. Return how many rows were new."""
    mine = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    theirs = {r[1] for r in source.execute(f"PRAGMA table_info({table})")}
    columns = [c for c in mine if c in theirs]
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
    cursor = source.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY {', '.join(keys) or 'rowid'}")
    owner = columns.index("id" if table == "sessions" else "session_id")
    while rows := cursor.fetchmany(BATCH):
        rows = [r for r in rows if r[owner] in kept]
        for row in rows:
            named.update(key for value in row if isinstance(value, str) for key in BLOB_KEY.findall(value))
        conn.executemany(sql, rows)
    return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] - before


def _copy_blobs(conn: sqlite3.Connection, source: sqlite3.Connection, named: set[str]) -> int:
    before = conn.execute("SELECT count(*) FROM blobs").fetchone()[0]
    wanted = sorted(named)
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        rows = source.execute(
            f"SELECT hash, kind, size, content FROM blobs WHERE hash IN ({', '.join('?' * len(chunk))})", chunk
        ).fetchall()
        conn.executemany("INSERT OR IGNORE INTO blobs (hash, kind, size, content) VALUES (?, ?, ?, ?)", rows)
    return conn.execute("SELECT count(*) FROM blobs").fetchone()[0] - before
