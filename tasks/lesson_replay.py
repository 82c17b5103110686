"""Lessons at the moment of a repeat, by state replay.

A task is attempted twice (two seeds). The lessons the first session left (its own store, nothing
else) are shown at every state of the second session as the session would have shown them: the
start-of-session block appended to the system prompt, and after each failing call of the recorded
prefix, the lessons for that failure appended to its tool message. K replies are drawn at each
state under the same seeds with and without them, and each is labelled by running it on a copy of
the files as they were (`tasks.states`). The wording of the lessons is a variable: each variant
rewrites the same lessons (chosen by the same retrieval) before they are shown.

What is counted per sample: a **repeat** (a call error whose tool, kind and target the first
session's calls already failed with, or the same tool on a target that failed there), a call error,
a **copy** (a call on a wrong value a shown lesson quotes: a target that failed, quoted by the
lesson's text; the arm without lessons is counted against the same values), the prompt tokens, and
whether enforcement (`LessonBook.known_failure`) would have answered the call before it ran.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.protocol import Lesson, event_from_dict, is_call_error
from agent.protocol.arguments import read_arguments
from agent.protocol.roles import roles_for
from feedback_store.lessons.book import BLOCK_HEADER, FAILURE_HEADER, LessonBook, render
from feedback_store.lessons.distill import gist, lesson_text, live_lessons
from tasks.states import Label, State

Situation = tuple[str, str, str | None]


def _descriptive(row: dict[str, Any]) -> str:
    """The wording lessons had before: the failed call first, then what worked."""
    tool = f"`{row['tool']}`" if row["tool"] else "a reply"
    where = f"{tool} on {row['target']}" if row["target"] else tool
    fixed = f" What worked: {row['correction']}" if row["correction"] else ""
    return f"{where} failed ({row['error_kind']}): {gist(row['feedback'] or '')}.{fixed}"


def _fix_only(row: dict[str, Any]) -> str:
    """Only what to do; the failure is not named at all (a lesson without a fix keeps its check)."""
    if row["correction"]:
        return f"Do this: {row['correction']}."
    return _prescriptive(row)


def _prescriptive(row: dict[str, Any]) -> str:
    """As shipped (`lesson_text`): what to do first, the failed value last and only without a fix."""
    return lesson_text(
        row["tool"],
        row["error_kind"],
        row["target"],
        row["occurrences"],
        gist(row["feedback"] or ""),
        row["correction"],
    )


WORDINGS: dict[str, Callable[[dict[str, Any]], str]] = {
    "prescriptive": _prescriptive,
    "descriptive": _descriptive,
    "fix_only": _fix_only,
}


@dataclass(frozen=True)
class Shown:
    """A state's conversation as the session would have had it with lessons, and what they quote."""

    messages: list[dict[str, Any]]
    lessons: tuple[Lesson, ...]
    quoted: frozenset[tuple[str, str]]  # (tool, target) wrong values the shown texts quote
    tokens: int  # estimated tokens the lessons add


@dataclass(frozen=True)
class Recorded:
    """What a recorded session did, from its events: how it started and each call's outcome."""

    session_id: str
    repository: str | None
    model: str
    focus: str  # the first instruction: what the start block is chosen for
    finished: dict[str, Any]  # call id -> ToolCallFinished
    arguments: dict[str, str]  # call id -> the arguments the model sent

    @property
    def failures(self) -> set[Situation]:
        """Its call errors, keyed as pairs are (tool, kind, target)."""
        return {
            (e.name, e.error_kind or "failed", e.target)
            for e in self.finished.values()
            if not e.ok and e.error_kind != "interrupted" and is_call_error(e.error_kind, e.exit_code)
        }


def recorded(events: list[dict[str, Any]]) -> Recorded:
    parsed = [event_from_dict(e) for e in events]
    started = parsed[0]
    finished, arguments, focus = {}, {}, ""
    for event in parsed[1:]:
        if event.type == "turn_started" and not focus:
            focus = str((event.message or {}).get("content") or "")
        elif event.type == "assistant_message":
            for call in (event.message or {}).get("tool_calls") or []:
                arguments[call.get("id") or ""] = (call.get("function") or {}).get("arguments") or ""
        elif event.type == "tool_call_finished":
            finished[event.call_id] = event
    return Recorded(
        session_id=started.session_id,
        repository=getattr(started, "repository", None),
        model=started.model,
        focus=focus,
        finished=finished,
        arguments=arguments,
    )


def with_lessons(
    state: State, session: Recorded, book: LessonBook, rows: dict[str, dict[str, Any]], wording: str, root: Path
) -> Shown:
    """`state`'s messages with the lessons `book` holds, as `session` would have been shown them at
    `root` (the files at the state), reworded by `wording`; `rows` are the book's lesson rows by id."""
    reword = WORDINGS[wording]

    def worded(found: Any, header: str, budget: int | None = None) -> Any:
        lessons = [dataclasses.replace(x, text=reword(rows[x.id])) for x in found.lessons]
        return render(header, lessons, budget)

    budget = int(state.config.get("lessons_tokens") or 0)
    block = book.session_block(str(root), session.model, budget, session.focus, repository=session.repository)
    block = worded(block, BLOCK_HEADER, budget)
    messages = [dict(m) for m in state.messages]
    messages[0]["content"] = (messages[0].get("content") or "") + block.text
    shown_ids: set[str] = set()
    all_shown, tokens = list(block.lessons), block.tokens
    for message in messages:
        event = session.finished.get(message.get("tool_call_id") or "") if message.get("role") == "tool" else None
        if event is None or event.ok or event.error_kind == "interrupted":
            continue
        found = book.for_failure(
            tool=event.name,
            error_kind=event.error_kind,
            target=event.target,
            call=session.arguments.get(event.call_id, ""),
            feedback=event.result or "",
            workspace=str(root),
            session_id=session.session_id,
            shown=frozenset(shown_ids),
            repository=session.repository,
        )
        found = worded(found, FAILURE_HEADER)
        if found.lessons:
            message["content"] = (message.get("content") or "") + found.text
            shown_ids.update(x.id for x in found.lessons)
            all_shown += found.lessons
            tokens += found.tokens
    quoted = set()
    for lesson in all_shown:
        row = rows.get(lesson.id)
        if row and row["tool"] and row["target"] and row["target"] in lesson.text:
            if row["target"] not in (row["correction"] or ""):  # the fix names it too: it was not the wrong value
                quoted.add((row["tool"], row["target"]))
    return Shown(messages, tuple(all_shown), frozenset(quoted), tokens)


def lesson_rows(book: LessonBook) -> dict[str, dict[str, Any]]:
    """The user store's lessons by id (pending pairs distilled first), with the fields a wording needs."""
    return {row["id"]: row for row in live_lessons(book.store)}


def calls_of(reply: Any) -> list[tuple[str, str | None]]:
    """(tool, target) of each call a reply makes, its arguments read once, bounded."""
    out = []
    for call in reply.tool_calls or []:
        function = call.get("function") or {}
        value = read_arguments(function.get("arguments") or "").value
        name = function.get("name") or ""
        out.append((name, roles_for(name).target_of(value)))
    return out


def repeats(label: Label, first: set[Situation]) -> bool:
    """Whether a sample's call errors repeat the first session's: the same tool, kind and target,
    or the same tool on a target that failed there (the same wrong value, another error)."""
    wrong = {(tool, target) for tool, _, target in first if target}
    return any(f in first or (f[0], f[2]) in wrong for f in label.failures)


def copies(calls: list[tuple[str, str | None]], quoted: frozenset[tuple[str, str]]) -> bool:
    """Whether a sample calls a tool on a wrong value a shown lesson quoted."""
    return any((tool, target) in quoted for tool, target in calls if target)
