"""`teachback lessons list|show|pin|unpin|edit|delete|export`: see and steer what sessions are told.

The store loads inside the functions, when a command runs.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from cli.lessons_export import add_export_arguments, export_lessons
from cli.options import configured_db
from common.text import clip

EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE = 0, 1, 2
TEXT_WIDTH = 110


class LessonUsageError(Exception):
    """The command cannot be done as given; the message says what to give instead."""


def add_lessons_arguments(parser: argparse.ArgumentParser) -> None:
    """`teachback lessons [ACTION]`: with no action it lists, as `list` does."""
    db_help = "feedback database (default: $TEACHBACK_HOME/feedback.db)"
    parser.description = "See and steer the lessons sessions are shown; with no ACTION, list them."
    parser.add_argument("--db", metavar="PATH", help=db_help)
    parser.set_defaults(action="list", limit=50, json=False)
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: `lessons --db X list` keeps X (a sub-command's default would replace it).
    common.add_argument("--db", metavar="PATH", default=argparse.SUPPRESS, help=db_help)
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    listing = sub.add_parser("list", parents=[common], help="lessons, pinned first, then the most frequent")
    listing.add_argument("--limit", type=int, default=50, help="how many (default 50; 0: all)")
    listing.add_argument("--json", action="store_true", help="print JSON lines")
    show = sub.add_parser("show", parents=[common], help="one lesson with where it came from")
    show.add_argument("id", help="a lesson id (or a unique prefix of one)")
    pin = sub.add_parser(
        "pin", parents=[common], help="always show a lesson at session start; with --text, add your own"
    )
    pin.add_argument("id", nargs="?", help="the lesson to pin (omit with --text)")
    pin.add_argument("--text", help="your own lesson, in the words the model should read")
    pin.add_argument("--tool", help="also show it when this tool fails (with --text)")
    pin.add_argument("--target", help="also show it when a call on this path fails (with --text)")
    where = pin.add_mutually_exclusive_group()
    where.add_argument("--workspace", type=Path, default=Path.cwd(), help="the project it applies to (default: cwd)")
    where.add_argument("--everywhere", action="store_true", help="apply it in every workspace")
    unpin = sub.add_parser("unpin", parents=[common], help="stop pinning a lesson")
    unpin.add_argument("id")
    edit = sub.add_parser("edit", parents=[common], help="rewrite a lesson's text (new failures will not overwrite it)")
    edit.add_argument("id")
    edit.add_argument("--text", required=True, help="the new text")
    delete = sub.add_parser("delete", parents=[common], help="never show a lesson again")
    delete.add_argument("id")
    add_export_arguments(
        sub.add_parser("export", parents=[common], help="write this repository's lessons for other agents")
    )


def lessons_main(args: argparse.Namespace) -> int:
    from feedback_store.errors import StoreError
    from feedback_store.lessons.lessons import refresh
    from feedback_store.lessons.manage import LessonNotFound
    from feedback_store.store import open_store

    try:
        with open_store(args.db or configured_db()) as store:
            refresh(store, limit=None)
            return ACTIONS[args.action or "list"](store, args)
    except LessonNotFound as exc:
        print(f"teachback lessons: {exc}", file=sys.stderr)
        return EXIT_NOT_FOUND
    except (LessonUsageError, StoreError) as exc:
        print(f"teachback lessons: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _list(store: Any, args: argparse.Namespace) -> int:
    from feedback_store.lessons.manage import listed_lessons

    rows = shown_rows(listed_lessons(store, args.limit))
    if args.json:
        for row in rows:
            print(json.dumps(row, ensure_ascii=False, sort_keys=True))
        return EXIT_OK
    if not rows:
        print(
            "No lessons yet: they come from failures recorded in sessions and the fixes that followed "
            "(or add your own with `teachback lessons pin --text ...`)."
        )
        return EXIT_OK
    for row in rows:
        marks = (
            ("P" if row["pinned"] else "-")
            + ("U" if row["origin"] == "user" else "-")
            + ("E" if row["edited"] else "-")
        )
        print(f"{row['id']}  {marks}  {row['occurrences'] or 0:>4}  {clip(row['text'], TEXT_WIDTH)}")
    print(
        "\nP pinned, U your own, E edited; the number is how many recorded failures it was learned from. "
        "`teachback lessons show ID` for details."
    )
    return EXIT_OK


def _show(store: Any, args: argparse.Namespace) -> int:
    from feedback_store.lessons.manage import find_lesson, lesson_sources

    [row] = shown_rows([find_lesson(store, args.id)])
    sources = lesson_sources(store, row["id"])
    state = "deleted" if row["deleted"] else ("pinned" if row["pinned"] else "active")
    lines = [f"{row['id']} ({row['origin']}, {state}{', edited' if row['edited'] else ''})", "", row["text"], ""]
    if row["origin"] == "user":
        lines.append(
            f"Pinned by {row['author']} on {_date(row['created_at'])} for {row['workspace'] or 'every workspace'}."
        )
    else:
        lines.append(
            f"Situation: {row['tool']} on {row['target'] or '(no target)'}, error {row['error_kind']}; "
            f"{row['occurrences']} failure(s), {row['corrected']} with a recorded fix; last seen "
            f"{_date(row['last_seen'])}."
        )
        lines += ["", "Feedback of the failure it was distilled from (redacted):", row["feedback"] or ""]
        if row["correction"]:
            lines += ["", f"What worked: {row['correction']}"]
    if sources:
        lines += ["", "Sessions (newest first; flagged ones are never used):"]
        lines += [
            f"  {s['session_id']}  {_date(s['started_at'])}  {s['model']}  {s['workspace']}"
            f"{'  FLAGGED' if s['flagged'] else ''}"
            for s in sources
        ]
    print("\n".join(lines))
    return EXIT_OK


def _pin(store: Any, args: argparse.Namespace) -> int:
    if args.text is None and args.id is None:
        raise LessonUsageError("give the id of a lesson to pin, or --text with a lesson of your own.")
    if args.text is None:
        return _set(store, args.id, "pin", "pinned: shown at the start of every session it applies to")
    if args.id is not None:
        raise LessonUsageError("give either an id (to pin that lesson) or --text (a new lesson), not both.")
    if not args.text.strip():
        raise LessonUsageError("--text is empty: write the lesson the model should read.")
    from feedback_store.lessons.manage import pin_own_lesson

    ident = "U" + uuid.uuid4().hex[:12]
    workspace = None if args.everywhere else str(args.workspace.resolve())
    text = " ".join(args.text.split())
    pin_own_lesson(store, ident, text, tool=args.tool, target=args.target, workspace=workspace, author=_author())
    print(f"{ident} pinned for {workspace or 'every workspace'}.")
    return EXIT_OK


def _unpin(store: Any, args: argparse.Namespace) -> int:
    return _set(store, args.id, "unpin", "unpinned: shown only when it is relevant")


def _edit(store: Any, args: argparse.Namespace) -> int:
    text = " ".join(args.text.split())
    if not text:
        raise LessonUsageError("--text is empty: to stop a lesson being shown, use `teachback lessons delete`.")
    return _set(store, args.id, "edit", "edited", text)


def _delete(store: Any, args: argparse.Namespace) -> int:
    return _set(store, args.id, "delete", "deleted: no session will be shown it again")


def _set(store: Any, ident: str, change: str, done: str, text: str | None = None) -> int:
    from feedback_store.lessons.manage import change_lesson

    row = change_lesson(store, ident, change, text)
    print(f"{row['id']} {done}.")
    return EXIT_OK


def shown_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as people see them: the target and key (kept as recorded, for matching) redacted like the text."""
    from feedback_store.redaction.redactor import Redactor

    redactor = Redactor()
    return [{**row, **{k: redactor.redact(row[k]) for k in ("target", "key") if row[k]}} for row in rows]


def _author() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name in the environment or the password database
        return "unknown"


def _date(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts)) if ts else "-"


ACTIONS = {
    "list": _list,
    "show": _show,
    "pin": _pin,
    "unpin": _unpin,
    "edit": _edit,
    "delete": _delete,
    "export": export_lessons,
}
