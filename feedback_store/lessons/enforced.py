"""Which lessons answer a call before it runs, as SQL on the lessons tables and nothing else, so a
hook process can ask without importing the store (feedback_store.capture.guard) and sessions ask
the same question through LessonBook.known_failure."""

from __future__ import annotations

# Failures a lesson of this repository answers before the call runs (the path still does not exist).
ENFORCED = frozenset({"not_found"})
LESSON_COLUMNS = (
    "l.id, l.text, l.origin, l.pinned, l.tool, l.error_kind, l.target, l.occurrences, l.corrected, "
    "l.source_session, l.created_at"
)
USABLE = """l.deleted = 0 AND (l.origin = 'user' OR (l.occurrences > 0
    AND NOT EXISTS (SELECT 1 FROM flags f WHERE f.session_id = l.source_session)))"""
LEARNED_HERE = """SELECT lp.lesson_id FROM sessions s JOIN lesson_pairs lp ON lp.session_id = s.id
    WHERE {here} AND lp.lesson_id IS NOT NULL"""
# The distilled lessons that say this very call (tool, target) failed for want of its path, and
# what worked instead; parameters: tool, target, then ENFORCED sorted.
KNOWN_FAILURE = f"""SELECT {LESSON_COLUMNS} FROM lessons l WHERE l.tool = ? AND l.target = ?
    AND l.error_kind IN ({",".join("?" * len(ENFORCED))}) AND l.origin = 'distilled'
    AND l.corrected > 0 AND {USABLE} ORDER BY l.id"""
