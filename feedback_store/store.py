"""The SQLite feedback database: opening, write transactions, and the read side.

Several processes (language server, terminal app, CLI runs) may write one file at once: the file is
in WAL mode, every write transaction begins IMMEDIATE (it takes the write lock before reading, so
two writers never deadlock on a lock upgrade). A writer that finds the lock taken waits on SQLite's
busy timeout and then retries with backoff until its whole wait is spent, so a long transaction in
another process delays a write rather than dropping it.
"""

from __future__ import annotations

import bisect
import datetime as dt
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import sqlite_utils

from common.sqlite import is_busy, use_wal
from feedback_store.capture import inbox
from feedback_store.content.event_blobs import expand
from feedback_store.errors import StoreError
from feedback_store.migrations import migrate
from feedback_store.rows import Fix, Pair, SessionSummary

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0  # seconds a writer waits, in all, for another process's write transaction
# One attempt waits on SQLite's own busy handler this long; then the writer pauses (doubling from
# FIRST_BACKOFF to MAX_BACKOFF) and tries again, which also covers the SQLITE_BUSY cases that return
# without calling the busy handler (WAL recovery by another connection, a stale snapshot).
BUSY_TIMEOUT = 1.0
FIRST_BACKOFF, MAX_BACKOFF = 0.05, 1.0
WAL_CHECKPOINT_PAGES = 10_000
WAL_SIZE_LIMIT = 64 * 1024 * 1024  # bytes the log file is truncated to after a checkpoint
STREAM_BATCH = 500  # rows read at a time by a streamed query


def open_store(path: str | Path, *, timeout: float = DEFAULT_TIMEOUT) -> Store:
    """Open (creating and migrating as needed) the feedback database at `path` (the caller's
    settings name it); `timeout` is how long, in all, each write waits for another process's write
    lock."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise StoreError(
            f"The feedback database path {path} is a folder. Give a file path, such as "
            f"--db {path / 'feedback.db'} (or TEACHBACK_DB)."
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"Cannot create the folder for the feedback database {path}: {exc.strerror}. "
            "Choose a writable location with --db PATH or TEACHBACK_DB."
        ) from exc
    try:
        conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise explain(exc, path) from exc
    try:
        use_wal(conn, timeout)
        # In WAL mode NORMAL loses nothing on a process crash; only a power cut may drop the last
        # commits, and the file stays consistent either way.
        conn.execute("PRAGMA synchronous=NORMAL")
        # Checkpoints are where the fsyncs happen: doing them every ~40 MB of log rather than every
        # 4 MB makes the per-event commits of a live session about a third faster.
        conn.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
        db = sqlite_utils.Database(conn, execute_plugins=False)
        if db.table_names() and "migrations" not in db.table_names():
            conn.close()
            raise not_ours(path)
        migrate(db)
    except sqlite3.Error as exc:
        conn.close()
        raise explain(exc, path) from exc
    store = Store(db, path, wait=timeout)
    store.take_hook_queue()
    return store


def not_ours(path: Path) -> StoreError:
    return StoreError(
        f"{path} is an SQLite database of another program, not a teachback feedback "
        "database; teachback leaves it alone. Point --db / TEACHBACK_DB at another file."
    )


def explain(exc: sqlite3.Error, path: Path) -> StoreError:
    """Turn an sqlite3 error into a StoreError that says how to fix it."""
    text = str(exc)
    lowered = text.lower()
    if "not a database" in lowered or "malformed" in lowered or "corrupt" in lowered:
        return StoreError(
            f"The feedback database {path} is damaged or is not a teachback database ({text}). "
            f"Move it aside (mv '{path}' '{path}.bad') and teachback will start a fresh one, "
            "or point --db / TEACHBACK_DB at another file."
        )
    if "locked" in lowered or "busy" in lowered:
        return StoreError(
            f"The feedback database {path} is locked: another program has held a write "
            f"transaction on it for too long ({text}). Close that program (another teachback "
            "process or an SQLite browser with unsaved changes) and retry, let writes wait longer "
            "with the db_wait setting (TEACHBACK_DB_WAIT, seconds), or use --db PATH."
        )
    if "readonly" in lowered or "unable to open" in lowered or "permission" in lowered:
        return StoreError(
            f"Cannot write the feedback database {path} ({text}). Check the permissions of the "
            "file and its folder (and, on Linux, the immutable flag: lsattr, chattr -i), or choose "
            "a writable file with --db PATH or TEACHBACK_DB."
        )
    return StoreError(f"The feedback database {path} failed: {text}.")


def parse_since(since: float | str | dt.datetime | None) -> float | None:
    """A Unix time from a number, a datetime or an ISO date/time string ("2025-06-01")."""
    if since is None or isinstance(since, (int, float)):
        return since
    if isinstance(since, str):
        try:
            since = dt.datetime.fromisoformat(since)
        except ValueError:
            raise StoreError(
                f"--since must be an ISO date or time such as 2025-06-01 or 2025-06-01T12:00, got {since!r}."
            ) from None
    if since.tzinfo is None:
        since = since.astimezone()
    return since.timestamp()


class Store:
    def __init__(self, db: sqlite_utils.Database, path: Path, *, wait: float = DEFAULT_TIMEOUT) -> None:
        self.db = db
        self.path = path
        self.wait = wait  # seconds, in all, a write waits for another process's write lock
        self._lock = threading.RLock()  # one connection, shared by the threads of one process
        self._blob_cache: dict[str, Any] = {}
        self._busy_ms: int | None = None

    # -- writing ---------------------------------------------------------------------------

    def write(self, wait: float | None = None) -> _WriteTransaction:
        """One IMMEDIATE write transaction (`with store.write() as conn:`); committed on exit, rolled
        back on error. Waits up to `wait` seconds (default: the store's) for the write lock, retrying
        with backoff."""
        return _WriteTransaction(self, self.wait if wait is None else wait)

    def _begin(self, conn: sqlite3.Connection, wait: float) -> None:
        deadline = time.monotonic() + wait
        pause = FIRST_BACKOFF
        while True:
            self._set_busy_timeout(conn, min(BUSY_TIMEOUT, max(0.0, deadline - time.monotonic())))
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.Error as exc:
                left = deadline - time.monotonic()
                if not is_busy(exc) or left <= 0:
                    raise explain(exc, self.path) from exc
                log.info("%s is locked by another process; retrying in %.2f s", self.path, min(pause, left))
                time.sleep(min(pause, left))
                pause = min(pause * 2, MAX_BACKOFF)

    def _set_busy_timeout(self, conn: sqlite3.Connection, seconds: float) -> None:
        ms = int(seconds * 1000)
        if ms != self._busy_ms:
            conn.execute(f"PRAGMA busy_timeout = {ms}")
            self._busy_ms = ms

    def take_hook_queue(self) -> int:
        """Move the hook payloads queued while this database was locked into its inbox
        (feedback_store.capture.inbox); how many rows. A database locked now keeps the queue for
        the next opener."""
        taken = inbox.take_queue(self.path)
        if not taken:
            return 0
        try:
            with self.write(wait=0) as conn:
                inbox.insert(conn, [row for _, rows in taken for row in rows])
        except StoreError as exc:
            log.info("hook payloads stay queued: %s", exc)
            return 0
        for path, _ in taken:
            path.unlink(missing_ok=True)
        return sum(len(rows) for _, rows in taken)

    def check_writable(self) -> None:
        """Raise StoreError at once if the file takes no writes (a read-only or immutable file or
        folder). A database that is only busy passes: writes will wait for it."""
        try:
            with self.write(wait=0) as conn:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                conn.execute(f"PRAGMA user_version = {int(version)}")
        except StoreError as exc:
            if not isinstance(exc.__cause__, sqlite3.Error) or not is_busy(exc.__cause__):
                raise

    def close(self) -> None:
        with self._lock:
            self.db.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading ---------------------------------------------------------------------------

    def query(self, sql: str, params: tuple | list | dict = ()) -> list[dict[str, Any]]:
        with self._lock:
            try:
                cursor = self.db.conn.execute(sql, params)
                names = [d[0] for d in cursor.description]
                return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
            except sqlite3.Error as exc:
                raise explain(exc, self.path) from exc

    def blob(self, content_hash: str | None) -> str | None:
        if content_hash is None:
            return None
        rows = self.query("SELECT content FROM blobs WHERE hash = ?", (content_hash,))
        return rows[0]["content"] if rows else None

    def session_ids(self) -> set[str]:
        """The ids of every recorded session."""
        return {row["id"] for row in self.query("SELECT id FROM sessions")}

    def task_sessions(self) -> dict[str, dict[str, Any]]:
        """The sessions that are graded task attempts, oldest first: id -> their `task` (instance
        id, attempt, reward, ...), as `teachback tasks run` marked them."""
        rows = self.query(
            "SELECT id, json_extract(config, '$.task') AS task FROM sessions "
            "WHERE json_extract(config, '$.task.instance_id') IS NOT NULL ORDER BY started_at, id"
        )
        return {row["id"]: json.loads(row["task"]) for row in rows}

    def mark_task(self, session_id: str, task: dict[str, Any]) -> None:
        """Record that the session is a graded task attempt: its `config.task` (instance id,
        attempt, reward, pass fractions), as `task_sessions` reads it back."""
        with self.write() as conn:
            conn.execute(
                "UPDATE sessions SET config = json_set(coalesce(config, '{}'), '$.task', json(?)) WHERE id = ?",
                (json.dumps(task), session_id),
            )

    def clean_replies(self) -> list[tuple[str, int]]:
        """(session id, message seq) of the assistant replies that made tool calls and whose every
        call succeeded, in unflagged sessions, newest session first. A task grader's test run is
        recorded as a call (id grader_...) that the model never made: it is not the reply's."""
        rows = self.query(
            """WITH calls AS (SELECT session_id, message_seq, status FROM tool_calls
                           WHERE call_id NOT LIKE 'grader!_%' ESCAPE '!')
            SELECT m.session_id, m.seq FROM messages m JOIN sessions s ON s.id = m.session_id
            WHERE m.role = 'assistant'
              AND EXISTS (SELECT 1 FROM calls t WHERE t.session_id = m.session_id AND t.message_seq = m.seq)
              AND NOT EXISTS (SELECT 1 FROM calls t WHERE t.session_id = m.session_id
                              AND t.message_seq = m.seq AND t.status != 'ok')
              AND NOT EXISTS (SELECT 1 FROM flags f WHERE f.session_id = m.session_id)
            ORDER BY s.started_at DESC, m.session_id, m.seq"""
        )
        return [(row["session_id"], row["seq"]) for row in rows]

    def list_sessions(self, limit: int = 50, *, workspace: str | None = None, offset: int = 0) -> list[SessionSummary]:
        """The newest sessions first; only those recorded in the folder `workspace`, when given."""
        rows = self.query(
            """
            SELECT s.id, s.workspace, s.model, s.frontend, s.started_at, s.title,
                   (SELECT count(*) FROM turns t WHERE t.session_id = s.id) AS turns,
                   (SELECT count(*) FROM pairs p WHERE p.session_id = s.id) AS pairs,
                   EXISTS (SELECT 1 FROM flags f WHERE f.session_id = s.id) AS flagged,
                   (SELECT max(e.ts) FROM events e WHERE e.session_id = s.id) AS updated_at
            FROM sessions s WHERE ? IS NULL OR s.workspace = ?
            ORDER BY s.started_at DESC, s.id DESC LIMIT ? OFFSET ?
            """,
            (workspace, workspace, limit, offset),
        )
        return [SessionSummary(**{**row, "flagged": bool(row["flagged"])}) for row in rows]

    def conversation(self, session_id: str) -> list[dict[str, Any]]:
        """The session's messages exactly as sent, system message first."""
        if not self.query("SELECT 1 FROM sessions WHERE id = ?", (session_id,)):
            raise StoreError(
                f"No session {session_id!r} in {self.path}. List recorded sessions with "
                "`teachback stats` or the terminal app's session list."
            )
        _, messages = self._messages(session_id)
        return messages

    def events(self, session_id: str) -> list[dict[str, Any]]:
        """The session's event log (as JSON objects, exactly as emitted), in the order it was recorded."""
        rows = self.query("SELECT json FROM events WHERE session_id = ? ORDER BY rowid", (session_id,))
        texts: dict[str, str | None] = {}

        def blob(key: str) -> str | None:
            if key not in texts:
                texts[key] = self.blob(key)
            return texts[key]

        return [expand(json.loads(row["json"]), blob) for row in rows]

    def flags(self, session_id: str | None = None) -> list[dict[str, Any]]:
        if session_id is None:
            return self.query("SELECT * FROM flags ORDER BY created_at, id")
        return self.query("SELECT * FROM flags WHERE session_id = ? ORDER BY created_at, id", (session_id,))

    def pairs(
        self,
        source: str | None = None,
        tool: str | None = None,
        model: str | None = None,
        since: float | str | dt.datetime | None = None,
        *,
        include_flagged: bool = True,
        session_id: str | None = None,
    ) -> list[Pair]:
        return list(
            self.iter_pairs(
                source=source,
                tool=tool,
                model=model,
                since=since,
                include_flagged=include_flagged,
                session_id=session_id,
            )
        )

    def count_pairs(self, **filters: Any) -> int:
        where, params = _pair_filters(**filters)
        rows = self.query(f"SELECT count(*) AS n FROM pairs p JOIN sessions s ON s.id = p.session_id {where}", params)
        return rows[0]["n"]

    def _stream(self, sql: str, params: tuple | list | dict = ()) -> Iterator[dict[str, Any]]:
        """The rows of a query as they are read, a batch at a time: a large result is never held
        whole, and the store's lock is held only while a batch is read."""
        with self._lock:
            try:
                cursor = self.db.conn.execute(sql, params)
            except sqlite3.Error as exc:
                raise explain(exc, self.path) from exc
        names = [d[0] for d in cursor.description]
        try:
            while True:
                with self._lock:
                    try:
                        rows = cursor.fetchmany(STREAM_BATCH)
                    except sqlite3.Error as exc:
                        raise explain(exc, self.path) from exc
                if not rows:
                    return
                for row in rows:
                    yield dict(zip(names, row, strict=True))
        finally:
            cursor.close()

    def iter_pairs(self, **filters: Any) -> Iterator[Pair]:
        """Pairs in a deterministic order: by session id (time-ordered), then position in the conversation."""
        where, params = _pair_filters(**filters)
        rows = self._stream(
            f"""
            SELECT p.*, s.model, s.tools_hash AS session_tools_hash,
                   EXISTS (SELECT 1 FROM flags f WHERE f.session_id = p.session_id) AS flagged,
                   v.ts AS fix_at, v.type = 'tool_call_finished' AND fx.status = 'error' AS fix_failed,
                   fx.roles AS fix_roles
            FROM pairs p JOIN sessions s ON s.id = p.session_id
              LEFT JOIN events v ON v.id = p.correction_event_id
              LEFT JOIN tool_calls fx ON fx.finished_id = p.correction_event_id {where}
            ORDER BY p.session_id, p.completion_seq, p.source, p.id
            """,
            params,
        )
        current: str | None = None
        seqs: list[int] = []
        messages: list[dict[str, Any]] = []
        for row in rows:
            if row["session_id"] != current:
                current = row["session_id"]
                seqs, messages = self._messages(current)
            pair = self._pair(row, seqs, messages)
            if pair is not None:
                yield pair

    def _pair(self, row: dict[str, Any], seqs: list[int], messages: list[dict[str, Any]]) -> Pair | None:
        at = bisect.bisect_left(seqs, row["completion_seq"])
        if at >= len(seqs) or seqs[at] != row["completion_seq"]:
            return None  # the failed message was never recorded: nothing to train on

        def message_at(seq: int) -> dict[str, Any] | None:
            index = bisect.bisect_left(seqs, seq)
            return messages[index] if index < len(seqs) and seqs[index] == seq else None

        fix = None
        if row["fix_at"] is not None:
            roles = json.loads(row["fix_roles"]) if row["fix_roles"] else None
            fix = Fix(row["correction_call_id"], row["correction_seq"], row["fix_at"], not row["fix_failed"], roles)
        return Pair(
            id=row["id"],
            session_id=row["session_id"],
            source=row["source"],
            tool=row["tool"],
            error_kind=row["error_kind"],
            target=row["target"],
            feedback=row["feedback"],
            prompt=messages[:at],
            completion=messages[at],
            correction=correction_of(row["correction"], row["correction_seq"], message_at),
            tools=self._tools(row["tools_hash"] or row["session_tools_hash"]),
            model=row["model"],
            created_at=row["created_at"],
            corrected_at=row["corrected_at"],
            flagged=bool(row["flagged"]),
            fix=fix,
        )

    def _messages(self, session_id: str) -> tuple[list[int], list[dict[str, Any]]]:
        rows = self.query("SELECT seq, message FROM messages WHERE session_id = ? ORDER BY seq", (session_id,))
        return [row["seq"] for row in rows], [json.loads(row["message"]) for row in rows]

    def _tools(self, tools_hash: str | None) -> list[dict[str, Any]]:
        if tools_hash is None:
            return []
        if tools_hash not in self._blob_cache:
            text = self.blob(tools_hash)
            self._blob_cache[tools_hash] = json.loads(text) if text else []
        return self._blob_cache[tools_hash]

    def stats(self) -> dict[str, Any]:
        from feedback_store.stats import compute_stats

        return compute_stats(self)


def correction_of(
    correction: str | None, correction_seq: int | None, message_at: Callable[[int], dict[str, Any] | None]
) -> dict[str, Any] | None:
    """A pair's correction, from its row: the message the pair holds (a user's own version of a
    file), else the recorded message at `correction_seq`. The one place a correction is resolved."""
    if correction is not None:
        return json.loads(correction)
    return message_at(correction_seq) if correction_seq is not None else None


class _WriteTransaction:
    """Store.write's context manager. A class rather than a generator: the live recorder opens one
    per event, and a generator-based one costs about a microsecond more each time."""

    __slots__ = ("store", "wait")

    def __init__(self, store: Store, wait: float) -> None:
        self.store, self.wait = store, wait

    def __enter__(self) -> sqlite3.Connection:
        store = self.store
        conn = store.db.conn
        store._lock.acquire()
        try:
            store._begin(conn, self.wait)
        except BaseException:
            store._lock.release()
            raise
        return conn

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        store = self.store
        conn = store.db.conn
        try:
            if kind is None:
                try:
                    conn.execute("COMMIT")
                    return
                except sqlite3.Error as error:
                    exc = error
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise explain(exc, store.path) from exc
        finally:
            store._lock.release()


def _pair_filters(
    source: str | None = None,
    tool: str | None = None,
    model: str | None = None,
    since: float | str | dt.datetime | None = None,
    include_flagged: bool = True,
    session_id: str | None = None,
) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (("p.source", source), ("p.tool", tool), ("s.model", model), ("p.session_id", session_id)):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    start = parse_since(since)
    if start is not None:
        clauses.append("p.created_at >= ?")
        params.append(start)
    if not include_flagged:
        clauses.append("NOT EXISTS (SELECT 1 FROM flags f WHERE f.session_id = p.session_id)")
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params
