"""The lesson book: lessons told to the model when they matter.

A `LessonBook` serves sessions (it satisfies `agent.interfaces.LessonSource`): a block for the system
prompt, within a token budget and in a stable order, and after a failing call at most
MAX_FAILURE_LESSONS lessons: the same situation first, then similar failures found through the
index. The user's own store is read first (this workspace, then the rest), then team stores. The
lessons are distilled from pairs by feedback_store.lessons.distill.
"""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agent.protocol import LONE_SURROGATE, Lesson, Lessons
from agent.protocol.roles import roles_for
from feedback_store.errors import StoreError
from feedback_store.lessons.distill import PATH_HABITS, REFRESH_LIMIT, refresh
from feedback_store.lessons.enforced import ENFORCED, KNOWN_FAILURE, LEARNED_HERE, LESSON_COLUMNS, USABLE
from feedback_store.store import Store, open_store

log = logging.getLogger(__name__)

MAX_FAILURE_LESSONS = 2
SIMILAR_CANDIDATES = 40  # newest index hits scored for similarity
BLOCK_CANDIDATES = 200  # most frequent lessons, and most frequent learned in the workspace, considered
MIN_LINE_TOKENS = 15  # no lesson line is shorter: a block with less room left is full
BLOCK_HEADER = "\nLessons from earlier sessions (mistakes made before, and what fixed them):\n"
FAILURE_HEADER = "\n\nLessons from earlier sessions about failures like this one:\n"
SCOPES = ("workspace", "user", "team")
# Words of the tools' own error texts and plain English: they say nothing about the situation.
BOILERPLATE = frozenset(
    "the and for not was were with from that this file text send again copied exactly read_file shows current "
    "nothing changed closest lines similar old_text new_text call tool exit code failed error you your use "
    "path line lines into does did has have are can cannot should".split()
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_TOKEN = re.compile(r"[A-Za-z]{1,10}|\d{1,3}|[^\sA-Za-z\d]{1,2}")  # the repo map's estimate
_PATHLIKE = re.compile(r"[\w.-]*[\w-]/[\w./-]+|[\w.-]+\.[A-Za-z]\w*")  # a/b, x.py


def estimate_tokens(text: str) -> int:
    """The same cheap, deterministic estimate the repo map budgets with (errs on the high side)."""
    return len(_TOKEN.findall(text)) + text.count("\n")


# -- serving sessions ---------------------------------------------------------------------------


class Shelf:
    """One database lessons are read from: the user's own store, or a team store (read-only)."""

    def __init__(self, scope: str, store: Store | None = None, path: Path | None = None) -> None:
        self.scope = scope
        self.store = store
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self.unusable: str | None = None  # why a team store is skipped (it is not tried again)
        self.knows_repositories: bool | None = None  # whether its sessions name their repository

    def query(self, sql: str, params: Iterable[Any] = ()) -> list[dict[str, Any]]:
        # A lone surrogate the model sent (in a target, a call) cannot reach SQLite; the recorder
        # stored such text with U+FFFD in its place, so that is what it is looked up as.
        params = tuple(LONE_SURROGATE.sub("\ufffd", p) if isinstance(p, str) else p for p in params)
        if self.store is not None:
            return self.store.query(sql, params)
        with self._lock:
            if self._conn is None:
                uri = f"{self.path.resolve().as_uri()}?mode=ro"
                self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
            cursor = self._conn.execute(sql, params)
            names = [d[0] for d in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class LessonBook:
    """Lessons for sessions, from the user's store and any team stores. Reading never raises for a
    database problem: it is logged and the session goes on without lessons."""

    def __init__(
        self,
        store: Store,
        *,
        scope: str = "team",
        team: Iterable[str | Path] = (),
        owns_store: bool = False,
        refresh_limit: int | None = REFRESH_LIMIT,
    ) -> None:
        if scope not in SCOPES:
            raise ValueError(f"lessons_scope must be one of {', '.join(SCOPES)}, got {scope!r}")
        self.scope = scope
        self.store = store
        self.shelves = [Shelf("user", store=store)]
        if scope == "team":
            self.shelves += [Shelf("team", path=Path(p).expanduser()) for p in team]
        self.owns_store = owns_store
        self.refresh_limit = refresh_limit
        # (shelf, workspace, repository) -> the lessons learned there
        self._here: dict[tuple[int, str, str | None], frozenset[str]] = {}

    def close(self) -> None:
        for shelf in self.shelves[1:]:
            shelf.close()
        if self.owns_store:
            self.store.close()

    # -- the start of a session ------------------------------------------------------------------

    def session_block(
        self, workspace: str, model: str, budget_tokens: int, focus: str = "", *, repository: str | None = None
    ) -> Lessons:
        """Pinned lessons, then those about what `focus` (the first instruction) names, then those
        learned here (in this workspace, or in any clone of its `repository`), then those about
        files that exist here or habits of this model."""
        self._refresh()
        self._here.clear()  # what this workspace taught: read once per session, here
        chosen: dict[str, tuple[tuple, Lesson]] = {}
        for rank, shelf in enumerate(self.shelves):
            for order, lesson in self._block_candidates(shelf, workspace, repository, model, focus):
                if lesson.id not in chosen:
                    chosen[lesson.id] = ((*order[:3], rank, *order[3:]), lesson)
        ordered = [lesson for _, lesson in sorted(chosen.values(), key=lambda item: item[0])]
        return render(BLOCK_HEADER, ordered, budget_tokens)

    def _block_candidates(
        self, shelf: Shelf, workspace: str, repository: str | None, model: str, focus: str
    ) -> list[tuple[tuple, Lesson]]:
        named = sorted(set(_PATHLIKE.findall(focus)))
        here, here_params = self._here_clause(shelf, workspace, repository)
        rows = self._read(
            shelf,
            f"""SELECT {LESSON_COLUMNS}, s.model FROM lessons l
            LEFT JOIN sessions s ON s.id = l.source_session
            WHERE {USABLE} AND (l.origin != 'user' OR l.workspace IS NULL OR l.workspace = ?)
              AND l.id IN (SELECT id FROM lessons WHERE pinned = 1
                UNION SELECT * FROM (SELECT id FROM lessons ORDER BY occurrences DESC, id LIMIT ?)
                UNION SELECT * FROM (SELECT id FROM lessons WHERE id IN ({LEARNED_HERE.format(here=here)})
                                     ORDER BY occurrences DESC, id LIMIT ?)
                UNION SELECT id FROM lessons WHERE target IN ({",".join("?" * len(named))}))""",
            (workspace, BLOCK_CANDIDATES, *here_params, BLOCK_CANDIDATES, *named),
        )
        root, learned = Path(workspace), self._learned_here(shelf, workspace, repository)
        found = []
        for row in rows:
            mentioned = bool(row["target"]) and row["target"] in focus
            here = row["id"] in learned
            tier = _tier(row, here, root, model)
            if mentioned and tier is None:
                tier = 2
            if tier is None or (self.scope == "workspace" and tier > 1):
                continue
            order = (
                tier > 0,
                not mentioned,
                tier,
                row["model"] != model,
                not row["corrected"],
                -row["occurrences"],
                row["created_at"] or 0,
                row["id"],
            )
            found.append((order, _lesson(row, shelf, here)))
        return found

    # -- a failing call --------------------------------------------------------------------------

    def for_failure(
        self,
        *,
        tool: str,
        error_kind: str | None,
        target: str | None,
        call: str,
        feedback: str,
        workspace: str,
        session_id: str,
        shown: frozenset[str] = frozenset(),
        repository: str | None = None,
    ) -> Lessons:
        found: dict[str, Lesson] = {}
        for shelf in self.shelves:
            for lesson in self._same_situation(shelf, tool, error_kind, target, workspace, repository, session_id):
                found.setdefault(lesson.id, lesson)
        if len(found) < MAX_FAILURE_LESSONS + len(shown):
            terms = [t for t in search_terms(target, call, feedback) if t not in (tool, error_kind)]
            for shelf in self.shelves:
                for lesson in self._similar(shelf, tool, error_kind, terms, workspace, repository, session_id):
                    found.setdefault(lesson.id, lesson)
        picked = [lesson for lesson in found.values() if lesson.id not in shown][:MAX_FAILURE_LESSONS]
        return render(FAILURE_HEADER, picked)

    def _same_situation(
        self,
        shelf: Shelf,
        tool: str,
        kind: str | None,
        target: str | None,
        workspace: str,
        repository: str | None,
        session_id: str,
    ) -> list[Lesson]:
        rows = self._read(
            shelf,
            f"""SELECT {LESSON_COLUMNS} FROM lessons l
            WHERE l.tool IS ? AND l.error_kind IS ? AND l.target IS ? AND l.origin = 'distilled'
              AND l.source_session IS NOT ? AND {USABLE}
            UNION ALL SELECT {LESSON_COLUMNS} FROM lessons l
            WHERE l.pinned = 1 AND l.origin = 'user' AND l.deleted = 0 AND (l.tool IS NULL OR l.tool = ?)
              AND (l.target IS NULL OR l.target = ?) AND (l.tool IS NOT NULL OR l.target IS NOT NULL)
              AND (l.workspace IS NULL OR l.workspace = ?)""",
            (tool, kind, target, session_id, tool, target, workspace),
        )
        learned = self._learned_here(shelf, workspace, repository)
        if self.scope == "workspace":
            rows = [row for row in rows if row["origin"] == "user" or row["id"] in learned]
        rows.sort(key=lambda row: (row["origin"] != "user", row["id"]))
        return [_lesson(row, shelf, row["id"] in learned) for row in rows]

    def _similar(
        self,
        shelf: Shelf,
        tool: str,
        kind: str | None,
        terms: list[str],
        workspace: str,
        repository: str | None,
        session_id: str,
    ) -> list[Lesson]:
        if not terms:
            return []
        match = " AND ".join(
            f"{column} : {_quote(value)}"
            for column, value in (("tool", tool), ("error_kind", kind))
            if value and _WORD.search(value)
        )
        match = (match + " AND " if match else "") + "(" + " OR ".join(_quote(term) for term in terms) + ")"
        here, here_params = self._here_clause(shelf, workspace, repository)
        only_here = f" AND {here}" if self.scope == "workspace" else ""
        rows = self._read(
            shelf,
            f"""SELECT {LESSON_COLUMNS}, hit.target AS hit_target, hit.feedback AS hit_feedback,
                {here} AS here
            FROM (SELECT rowid, target, substr(feedback, 1, 400) AS feedback FROM pair_search
                  WHERE pair_search MATCH ? ORDER BY rowid DESC LIMIT ?) hit
            JOIN lesson_pairs lp ON lp.id = hit.rowid JOIN lessons l ON l.id = lp.lesson_id
            JOIN sessions s ON s.id = lp.session_id
            WHERE lp.session_id != ? AND l.source_session IS NOT ? AND {USABLE}
              AND NOT EXISTS (SELECT 1 FROM flags f WHERE f.session_id = lp.session_id){only_here}""",
            (*here_params, match, SIMILAR_CANDIDATES, session_id, session_id, *(here_params if only_here else ())),
        )
        wanted = set(terms)
        scored: dict[str, tuple[float, dict]] = {}
        for row in rows:
            words = {w.lower() for w in _WORD.findall(f"{row['hit_target'] or ''} {row['hit_feedback'] or ''}")}
            score = len(wanted & words) + (1 if row["here"] else 0)
            if score > scored.get(row["id"], (-1, None))[0]:
                scored[row["id"]] = (score, row)
        ranked = sorted(scored.values(), key=lambda item: (-item[0], item[1]["id"]))
        return [_lesson(row, shelf, bool(row["here"])) for _, row in ranked]

    # -- before a call --------------------------------------------------------------------------

    def known_failure(
        self, *, tool: str, target: str | None, workspace: str, repository: str | None = None
    ) -> Lesson | None:
        """The lesson learned here (this folder or a clone of this repository) that this very call
        failed because its path does not exist, when the path still does not exist and a fix was
        recorded: the call need not run, the lesson says what worked."""
        if not target or _names_command(tool) or not _plain_path(target) or _exists(Path(workspace), target):
            return None  # a command's target is no path: nothing to look up on every command
        for shelf in self.shelves:
            rows = self._read(shelf, KNOWN_FAILURE, (tool, target, *sorted(ENFORCED)))
            learned = self._learned_here(shelf, workspace, repository)
            for row in rows:
                if row["id"] in learned:
                    return _lesson(row, shelf, True)
        return None

    # -- reading ---------------------------------------------------------------------------------

    def _learned_here(self, shelf: Shelf, workspace: str, repository: str | None) -> frozenset[str]:
        key = (id(shelf), workspace, repository)
        if key not in self._here:
            here, params = self._here_clause(shelf, workspace, repository)
            rows = self._read(shelf, LEARNED_HERE.format(here=here), params)
            self._here[key] = frozenset(row["lesson_id"] for row in rows)
        return self._here[key]

    def _here_clause(self, shelf: Shelf, workspace: str, repository: str | None) -> tuple[str, tuple]:
        """Where a session `s` ran "here": in this folder, or in a clone of this repository (a team
        store from before sessions named their repository knows only folders)."""
        if repository is not None and shelf.knows_repositories is None:  # an older store has no column
            column = "SELECT 1 AS yes FROM pragma_table_info('sessions') WHERE name = 'repository'"
            shelf.knows_repositories = bool(self._read(shelf, column, ()))
        if repository is None or not shelf.knows_repositories:
            return "s.workspace = ?", (workspace,)
        return "(s.workspace = ? OR s.repository = ?)", (workspace, repository)

    def _refresh(self) -> None:
        try:
            refresh(self.store, limit=self.refresh_limit)
        except (StoreError, sqlite3.Error) as exc:  # locked or read-only: what is distilled still serves
            log.warning("could not distil new lessons in %s: %s", self.store.path, exc)

    def _read(self, shelf: Shelf, sql: str, params: Iterable[Any]) -> list[dict[str, Any]]:
        if shelf.unusable:
            return []
        try:
            return shelf.query(sql, params)
        except (StoreError, sqlite3.Error) as exc:  # locked, damaged; a team store missing or too old
            log.warning("lessons from %s skipped: %s", shelf.path or self.store.path, exc)
            if shelf.store is None:
                shelf.unusable = str(exc)
            return []


def _tier(row: dict[str, Any], here: bool, root: Path, model: str) -> int | None:
    """0: pinned; 1: learned in this workspace; 2: about a file that exists here, or a habit of this
    model (no target, or a path it guessed wrong and then corrected: the path never exists, the
    habit is what to tell); None: about somewhere else."""
    if row["pinned"]:
        return 0
    if here:
        return 1
    target = row["target"]
    habit = row["error_kind"] in PATH_HABITS and row["corrected"]
    if target is None or habit:
        return 2 if row["model"] == model else None
    if not _names_command(row["tool"]) and _exists(root, target):
        return 2
    return None


def _names_command(tool: str | None) -> bool:
    """Whether the tool's target is a command line, never a path (a lesson names only its tool: the
    built-in tools' roles say)."""
    roles = roles_for(tool)
    return roles.command is not None and roles.target == roles.command


def _plain_path(target: str) -> bool:
    """A relative path inside the workspace, as a file tool's target is (not a command)."""
    return not target.startswith(("/", "~", "..")) and "\0" not in target and "\n" not in target


def _exists(root: Path, target: str) -> bool:
    if target.startswith(("/", "..")) or "\0" in target:
        return False
    try:
        return (root / target).exists()
    except (OSError, ValueError):  # a name too long, or not a path at all
        return False


def _lesson(row: dict[str, Any], shelf: Shelf, here: bool) -> Lesson:
    scope = "team" if shelf.scope == "team" else ("workspace" if here else "user")
    return Lesson(id=row["id"], text=row["text"], origin=row["origin"], scope=scope, pinned=bool(row["pinned"]))


def render(header: str, lessons: list[Lesson], budget_tokens: int | None = None) -> Lessons:
    """The lessons as one block, keeping (in order) those that fit the budget."""
    if not lessons:
        return Lessons()
    used = estimate_tokens(header)
    kept, lines = [], []
    for lesson in lessons:
        if budget_tokens is not None and budget_tokens - used < MIN_LINE_TOKENS:
            break
        line = f"- {'(from the user) ' if lesson.origin == 'user' else ''}{lesson.text}\n"
        cost = estimate_tokens(line)
        if budget_tokens is not None and used + cost > budget_tokens:
            continue
        kept.append(lesson)
        lines.append(line)
        used += cost
    if not kept:
        return Lessons()
    return Lessons(text=header + "".join(lines), lessons=tuple(kept), tokens=used)


def search_terms(target: str | None, call: str, feedback: str, limit: int = 8) -> list[str]:
    """Words that say what this failure is about: the target's parts, then names from the call and
    the feedback (not the tools' boilerplate), in order of appearance."""
    terms: list[str] = []
    for text in (target or "", call[:500], feedback[:500]):
        for word in _WORD.findall(text):
            word = word.lower()
            if word not in BOILERPLATE and word not in terms and not word.isdigit():
                terms.append(word)
            if len(terms) == limit:
                return terms
    return terms


def _quote(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def book_for(settings: Any) -> LessonBook | None:
    """The LessonBook `agent.config.Settings` ask for (`lessons`, `lessons_scope`, `lessons_db`, the
    database), or None when lessons are off or nothing has been recorded yet."""
    if not settings.lessons:
        return None
    return open_lessons(
        settings.db_path(), scope=settings.lessons_scope, team=settings.lessons_db, wait=settings.db_wait
    )


def open_lessons(
    db: str | Path, *, scope: str = "team", team: Iterable[str] = (), wait: float = 30.0
) -> LessonBook | None:
    """A LessonBook on the database at `db`, or None when it does not exist yet (nothing to learn
    from) or cannot be opened (logged: the session runs without lessons)."""
    path = Path(db).expanduser()
    if not path.is_file():
        return None
    try:
        store = open_store(path, timeout=wait)
    except StoreError as exc:  # damaged, locked or another program's file
        log.warning("lessons are off for this session: %s", exc)
        return None
    return LessonBook(store, scope=scope, team=team, owns_store=True)
