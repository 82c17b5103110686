"""Lessons: what earlier sessions got wrong and what fixed it, told to the model when it matters.

The recorder's pair writes keep a full-text index current (`pair_search`, triggers of migration
m003) and mark each pair for distillation (`lesson_pairs.pending`). `refresh` distils pending pairs
into `lessons`: one per situation (tool, error kind, target), short, secrets redacted, with what
worked when a correction was recorded. Pairs of flagged sessions and monitor pairs never count.

A `LessonBook` serves sessions (it satisfies `agent.interfaces.LessonSource`): a block for the system
prompt, within a token budget and in a stable order, and after a failing call at most
MAX_FAILURE_LESSONS lessons: the same situation first, then similar failures found through the
index. The user's own store is read first (this workspace, then the rest), then team stores.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agent.protocol import Lesson, Lessons
from agent.protocol.arguments import read_arguments
from agent.protocol.roles import roles_for
from common.text import clip
from feedback_store.content.hashing import canonical_json, content_hash
from feedback_store.errors import StoreError
from feedback_store.lessons.enforced import ENFORCED, KNOWN_FAILURE, LEARNED_HERE, LESSON_COLUMNS, USABLE
from feedback_store.redaction.redactor import Redactor
from feedback_store.store import Store, correction_of, open_store

log = logging.getLogger(__name__)

MAX_FAILURE_LESSONS = 2
GIST_CHARS, FIX_CHARS, VALUE_CHARS = 140, 160, 60
REFRESH_LIMIT = 5000  # pending pairs distilled when a session starts; the rest the next time
REFRESH_BATCH = 200  # situations per write transaction, so recorders of other sessions wait little
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
_PROBLEM = re.compile(r"(?i)error|failed|exception|not found|no such|denied")


def estimate_tokens(text: str) -> int:
    """The same cheap, deterministic estimate the repo map budgets with (errs on the high side)."""
    return len(_TOKEN.findall(text)) + text.count("\n")


def lesson_id(situation: tuple[str | None, str | None, str | None]) -> str:
    return "L" + content_hash(canonical_json(list(situation))).split(":", 1)[1][:12]


# -- distillation -------------------------------------------------------------------------------

ELIGIBLE = """p.tool IS ? AND p.error_kind IS ? AND p.target IS ? AND p.source != 'monitor'
    AND NOT EXISTS (SELECT 1 FROM flags f WHERE f.session_id = p.session_id)"""
CORRECTED = "(p.correction_seq IS NOT NULL OR p.correction IS NOT NULL)"


def refresh(store: Store, redactor: Redactor | None = None, limit: int | None = REFRESH_LIMIT) -> int:
    """Distil pending pairs into lessons; return how many pairs were processed."""
    pending = store.query(
        "SELECT lp.pair_id, p.tool, p.error_kind, p.target FROM lesson_pairs lp JOIN pairs p ON p.id = lp.pair_id"
        " WHERE lp.pending = 1 ORDER BY lp.id LIMIT ?",
        (-1 if limit is None else limit,),
    )
    if not pending:
        return 0
    redactor = redactor or Redactor()
    by_situation: dict[tuple, list[str]] = {}
    for row in pending:
        by_situation.setdefault((row["tool"], row["error_kind"], row["target"]), []).append(row["pair_id"])
    situations = sorted(by_situation, key=repr)
    for start in range(0, len(situations), REFRESH_BATCH):
        with store.write() as conn:
            now = time.time()
            for situation in situations[start : start + REFRESH_BATCH]:
                _distill(conn, situation, by_situation[situation], redactor, now)
    return len(pending)


def live_lessons(store: Store) -> list[dict[str, Any]]:
    """The lessons not deleted, pending pairs distilled first, with the fields a wording needs."""
    refresh(store)
    return store.query(
        "SELECT id, tool, error_kind, target, occurrences, feedback, correction FROM lessons WHERE deleted = 0"
    )


def _distill(conn: sqlite3.Connection, situation: tuple, pair_ids: list[str], redactor: Redactor, now: float) -> None:
    ident = lesson_id(situation)
    marks = ",".join("?" * len(pair_ids))
    conn.execute(f"UPDATE lesson_pairs SET pending = 0, lesson_id = ? WHERE pair_id IN ({marks})", (ident, *pair_ids))
    count, corrected, last = conn.execute(
        f"SELECT count(*), sum({CORRECTED}), max(p.created_at) FROM pairs p WHERE {ELIGIBLE}", situation
    ).fetchone()
    if not count:  # every source is flagged (or a monitor finding): nothing to teach
        conn.execute("UPDATE lessons SET occurrences = 0, corrected = 0, updated_at = ? WHERE id = ?", (now, ident))
        return
    best = conn.execute(
        f"""SELECT p.id, p.session_id, p.feedback, p.correction, p.correction_seq, p.correction_call_id
        FROM pairs p WHERE {ELIGIBLE}
        ORDER BY {CORRECTED} DESC, p.created_at DESC, p.id DESC LIMIT 1""",
        situation,
    ).fetchone()
    tool, kind, target = situation
    feedback = redactor.redact(best[2][:2000])
    fix = _fix(conn, best, tool, redactor)
    text = redactor.redact(lesson_text(tool, kind, target, count, gist(feedback), fix))  # the target too
    conn.execute(
        """INSERT INTO lessons (id, key, origin, tool, error_kind, target, text, feedback, correction,
            occurrences, corrected, source_pair, source_session, created_at, updated_at, last_seen)
        VALUES (?, ?, 'distilled', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (id) DO UPDATE SET text = CASE WHEN lessons.edited THEN lessons.text ELSE excluded.text END,
            feedback = excluded.feedback, correction = excluded.correction, occurrences = excluded.occurrences,
            corrected = excluded.corrected, source_pair = excluded.source_pair,
            source_session = excluded.source_session, updated_at = excluded.updated_at, last_seen = excluded.last_seen""",
        (
            ident,
            canonical_json(list(situation)),
            tool,
            kind,
            target,
            text,
            feedback[:1000],
            fix,
            count,
            corrected or 0,
            best[0],
            best[1],
            now,
            now,
            last,
        ),
    )


def _fix(conn: sqlite3.Connection, best: tuple, tool: str | None, redactor: Redactor) -> str | None:
    """What worked, in one line: the correcting call (arguments redacted and shortened)."""
    _, session_id, _, correction, correction_seq, call_id = best

    def message_at(seq: int) -> dict[str, Any] | None:
        row = conn.execute(
            "SELECT message FROM messages WHERE session_id = ? AND seq = ?", (session_id, seq)
        ).fetchone()
        return json.loads(row[0]) if row else None

    message = correction_of(correction, correction_seq, message_at)
    if not message:
        return None
    calls = message.get("tool_calls") or []
    if not calls:
        content = (message.get("content") or "").strip()
        return (
            "the user changed the file by hand"
            if correction is not None
            else one_line(redactor.redact(content), FIX_CHARS) or None
        )
    # The call the recorder linked as the fix; a reply's first call of the failed tool for a pair
    # linked without one (the user's own version, an import).
    fixing = next((c for c in calls if call_id is not None and c.get("id") == call_id), None)
    named = [c.get("function") or {} for c in calls]
    call = (fixing.get("function") or {}) if fixing else next((c for c in named if c.get("name") == tool), named[0])
    # Values are quoted as JSON, whitespace as sent (a lesson says to copy old_text exactly); only a
    # line break, which would split the lesson's line, becomes a space.
    text = clip(f"{call.get('name')}({_short_arguments(call.get('arguments') or '', redactor)})", FIX_CHARS)
    return text.replace("\r", " ").replace("\n", " ")


def _short_arguments(arguments: str, redactor: Redactor) -> str:
    """`key="value", ...` as the call sent them (the concrete working form), long values cut."""
    value = read_arguments(arguments).value  # bounded: the model's text, never parsed unbounded
    if value is None:
        return redactor.redact(arguments)
    value = redactor.redact_value(value)
    shown = [(k, clip(v, VALUE_CHARS) if isinstance(v, str) else v) for k, v in value.items()]
    return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in shown)


# A wrong path the model guessed and then corrected: a habit of the model's, told at the start.
PATH_HABITS = frozenset({"not_found", "outside_workspace"})
# What to keep in mind with a fix, by the kind of failure it fixed (said as what to do).
HABITS = {
    "not_found": "paths are relative to the workspace root",
    "outside_workspace": "paths are relative to the workspace root",
    "no_match": "copy old_text exactly as read_file shows it",
    "schema": "send the arguments the tool's schema names",
}


def lesson_text(tool: str | None, kind: str | None, target: str | None, count: int, what: str, fix: str | None) -> str:
    """Said as what to do, the working form first: a small model copies what a lesson quotes, so
    the failed value comes last, and only where no fix says what to do instead."""
    times = f", {count} times" if count > 1 else ""
    if fix:
        habit = f"; {HABITS[kind]}" if kind in HABITS else ""
        return f"Do this: {fix} (it worked where an earlier {tool or 'call'} failed: {kind or 'error'}{times}{habit})."
    where = f"{tool or 'a reply'} on {target}" if target else (tool or "a reply")
    return f"Check before calling {tool or 'it'} again: {where} failed ({kind or 'error'}{times}): {what}"


def gist(feedback: str) -> str:
    """The part of a failure's feedback that says what went wrong, in one short line."""
    lines = [line.strip() for line in feedback.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    if lines[0].startswith("$ ") and len(lines) > 1:  # a command: its exit code and first problem line
        problem = next((line for line in lines[2:] if _PROBLEM.search(line)), lines[2] if len(lines) > 2 else "")
        return one_line(f"{lines[1]} {problem}", GIST_CHARS)
    return one_line(lines[0], GIST_CHARS)


def one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut[limit // 2 :] else cut) + "…"


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
        if self.store is not None:
            return self.store.query(sql, tuple(params))
        with self._lock:
            if self._conn is None:
                uri = f"{self.path.resolve().as_uri()}?mode=ro"
                self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
            cursor = self._conn.execute(sql, tuple(params))
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
