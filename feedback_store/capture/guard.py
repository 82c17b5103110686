"""Guarding another agent's calls from its PreToolUse hook: the enforced lesson of this folder that
says the very call fails (feedback_store.lessons.enforced, the question LessonBook.known_failure asks
for teachback's own sessions). Only the standard library and a read-only connection: a reader never
waits for a writer in WAL mode, and the hook must stay fast."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from feedback_store.lessons.enforced import ENFORCED, KNOWN_FAILURE, LEARNED_HERE

PATH_ARGUMENTS = ("file_path", "notebook_path", "path")  # the arguments that name one file


def path_target(tool_input: Any) -> str | None:
    if not isinstance(tool_input, dict):
        return None
    return next((tool_input[k] for k in PATH_ARGUMENTS if isinstance(tool_input.get(k), str) and tool_input[k]), None)


def known_failure(db: Path, *, tool: str, target: str, cwd: str) -> tuple[str, str] | None:
    """(lesson id, text) of the lesson learned in `cwd` that this call's path does not exist, while it
    still does not; None otherwise, or when the database cannot be read now."""
    if "\0" in target or not db.is_file():
        return None
    try:
        if Path(cwd, target).exists():  # the path exists now: what was learned no longer applies
            return None
        conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=0)
    except (OSError, ValueError, sqlite3.Error):
        return None
    try:
        here = f"SELECT 1 FROM ({LEARNED_HERE.format(here='s.workspace = ?')}) WHERE lesson_id = ?"
        for lesson_id, text, *_ in conn.execute(KNOWN_FAILURE, (tool, target, *sorted(ENFORCED))).fetchall():
            if conn.execute(here, (cwd, lesson_id)).fetchone():
                return lesson_id, text
    except sqlite3.Error:  # an older schema, or a file being replaced: the call goes ahead unguarded
        return None
    finally:
        conn.close()
    return None
