"""Reading feedback pairs: each with its prompt, completion, correction, tools and the fix the
recorder linked, filled in one query. The store (feedback_store.store.Store) reads its pairs this way."""

from __future__ import annotations

import bisect
import datetime as dt
import json
from collections.abc import Callable, Iterator
from typing import Any

from feedback_store.errors import StoreError
from feedback_store.rows import Fix, Pair


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


class PairReading:
    """The pair-reading half of the store: `Store` provides `query`, `blob`, `_stream` and `_blob_cache`."""

    _blob_cache: dict[str, Any]

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


def correction_of(
    correction: str | None, correction_seq: int | None, message_at: Callable[[int], dict[str, Any] | None]
) -> dict[str, Any] | None:
    """A pair's correction, from its row: the message the pair holds (a user's own version of a
    file), else the recorded message at `correction_seq`. The one place a correction is resolved."""
    if correction is not None:
        return json.loads(correction)
    return message_at(correction_seq) if correction_seq is not None else None


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
