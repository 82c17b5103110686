"""The lessons a person sees and steers (`teachback lessons`): find one by its id or the start of it,
list those shown, the sessions one was learned from, pin a lesson of one's own, and change one."""

from __future__ import annotations

import time
from typing import Any

from feedback_store.errors import StoreError
from feedback_store.store import Store

# What a person may change on a lesson, and the columns it sets (`edited` marks a text of theirs).
CHANGES = {
    "pin": "pinned = 1",
    "unpin": "pinned = 0",
    "edit": "text = ?, edited = 1",
    "delete": "deleted = 1, pinned = 0",
}


class LessonNotFound(StoreError):
    """No lesson (or more than one) matches the id given; the message says what to do."""


def find_lesson(store: Store, ident: str) -> dict[str, Any]:
    """The lesson whose id is `ident` or starts with it (deleted ones included)."""
    rows = store.query("SELECT * FROM lessons WHERE id = ?", (ident,))
    if not rows:
        rows = store.query(
            "SELECT * FROM lessons WHERE id LIKE ? ESCAPE '\\' ORDER BY id LIMIT 3",
            (ident.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",),
        )
    if not rows:
        raise LessonNotFound(f"no lesson {ident!r}. See the ids with `teachback lessons list`.")
    if len(rows) > 1:
        raise LessonNotFound(
            f"{ident!r} starts several lesson ids ({', '.join(r['id'] for r in rows)}, ...): give more of it."
        )
    return rows[0]


def listed_lessons(store: Store, limit: int | None) -> list[dict[str, Any]]:
    """The lessons sessions may be shown: pinned first, then a person's own, then the most seen."""
    return store.query(
        """SELECT * FROM lessons WHERE deleted = 0 AND (origin = 'user' OR occurrences > 0)
        ORDER BY pinned DESC, origin = 'user' DESC, occurrences DESC, id LIMIT ?""",
        (limit or -1,),
    )


def lesson_sources(store: Store, lesson_id: str, limit: int = 10) -> list[dict[str, Any]]:
    """The sessions a lesson was learned from, newest first, each saying whether it is flagged."""
    return store.query(
        """SELECT lp.session_id, s.workspace, s.model, s.started_at,
            EXISTS (SELECT 1 FROM flags f WHERE f.session_id = lp.session_id) AS flagged
        FROM lesson_pairs lp LEFT JOIN sessions s ON s.id = lp.session_id WHERE lp.lesson_id = ?
        GROUP BY lp.session_id ORDER BY s.started_at DESC LIMIT ?""",
        (lesson_id, limit),
    )


def pin_own_lesson(
    store: Store, ident: str, text: str, *, tool: str | None, target: str | None, workspace: str | None, author: str
) -> None:
    """A person's own lesson, pinned: shown at the start of every session in `workspace` (None: all)."""
    now = time.time()
    with store.write() as conn:
        conn.execute(
            """INSERT INTO lessons (id, origin, tool, target, text, pinned, workspace, author, created_at, updated_at)
            VALUES (?, 'user', ?, ?, ?, 1, ?, ?, ?, ?)""",
            (ident, tool, target, text, workspace, author, now, now),
        )


def change_lesson(store: Store, ident: str, change: str, text: str | None = None) -> dict[str, Any]:
    """Apply one of CHANGES to the lesson `ident` names (`text` for an edit); returns the lesson as it was."""
    row = find_lesson(store, ident)
    values = (text,) if change == "edit" else ()
    with store.write() as conn:
        conn.execute(
            f"UPDATE lessons SET {CHANGES[change]}, updated_at = ? WHERE id = ?", (*values, time.time(), row["id"])
        )
    return row


def repository_lessons(store: Store, folder: str, repository: str | None) -> list[dict[str, Any]]:
    """The lessons of one repository, in `listed_lessons`' order: those learned in sessions that ran
    in `folder` or below it, or in any clone of `repository` (imported sessions included), and the
    person's own pinned for `folder` or below it. Lessons pinned for every workspace are the person's
    habits, not the repository's, and stay out."""
    below = folder.rstrip("/") + "/"
    return store.query(
        """SELECT * FROM lessons l WHERE l.deleted = 0 AND (
            (l.origin = 'user' AND (l.workspace = ? OR substr(l.workspace, 1, ?) = ?))
            OR (l.origin != 'user' AND l.occurrences > 0
                AND NOT EXISTS (SELECT 1 FROM flags f WHERE f.session_id = l.source_session)
                AND l.id IN (SELECT lp.lesson_id FROM lesson_pairs lp JOIN sessions s ON s.id = lp.session_id
                    WHERE s.workspace = ? OR substr(s.workspace, 1, ?) = ? OR s.repository = ?)))
        ORDER BY l.pinned DESC, l.origin = 'user' DESC, l.occurrences DESC, l.id""",
        (folder, len(below), below, folder, len(below), below, repository),
    )
