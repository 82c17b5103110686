"""A workspace's recorded sessions for the editor's history: `session/list` (the sessions the feedback
store holds for the folder, newest first, a page at a time) and what `session/resume` and
`session/load` need to know (that the session is recorded). Blocking: run in a thread."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

from acp import RequestError
from acp.schema import ListSessionsResponse, SessionInfo

from agent.config import Settings
from agent.protocol import event_from_dict

log = logging.getLogger(__name__)

PAGE = 50  # sessions in one answer to session/list


def listed_sessions(settings: Settings, cwd: Path | None, cursor: str | None) -> ListSessionsResponse:
    """One page of the recorded sessions (of folder `cwd` when given); `cursor` is the last page's
    `nextCursor` (where the page starts)."""
    from feedback_store import StoreError, open_store

    offset = _offset(cursor)
    workspace = str(cwd.resolve()) if cwd is not None else None
    try:
        with open_store(settings.db_path()) as store:
            rows = store.list_sessions(PAGE, workspace=workspace, offset=offset)
    except StoreError as exc:
        raise RequestError.internal_error({"details": str(exc)}) from exc
    sessions = [
        SessionInfo(session_id=row.id, cwd=row.workspace, title=row.title, updated_at=_iso(row.updated_at))
        for row in rows
        if row.workspace and row.turns  # one opened but never prompted has nothing to load
    ]
    more = str(offset + PAGE) if len(rows) == PAGE else None
    return ListSessionsResponse(sessions=sessions, next_cursor=more)


def recorded_events(settings: Settings, session_id: str) -> list[Any]:
    """A recorded session's events, for session/load and session/resume."""
    from feedback_store import StoreError, open_store

    try:
        with open_store(settings.db_path()) as store:
            rows = store.events(session_id)
    except StoreError as exc:
        raise RequestError.internal_error({"details": str(exc)}) from exc
    if not rows:
        raise RequestError.invalid_params(
            {
                "details": f"no session {session_id!r} is recorded in {settings.db_path()}; session/list or "
                "`teachback stats` lists them"
            }
        )
    events = []
    for row in rows:
        try:
            events.append(event_from_dict(row))
        except (TypeError, ValueError) as exc:  # recorded by another version: left out of the replay
            log.info("left an event out of the replay of %s: %s", session_id, exc)
    return events


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit() or len(cursor) > 12:
        raise RequestError.invalid_params(
            {"details": f"the cursor {cursor[:40]!r} is not one session/list gave; send the nextCursor it answered"}
        )
    return int(cursor)


def _iso(ts: float | None) -> str | None:
    return dt.datetime.fromtimestamp(ts, tz=dt.UTC).isoformat() if ts is not None else None
