"""Lessons as Agent Skills and as one marked section of AGENTS.md: pure functions from lesson rows
to text (feedback_store/lessons/publish.py writes them).

The Agent Skills format (agentskills.io/specification): a folder per skill holding `SKILL.md`, YAML
front matter with `name` (1-64 characters of a-z, 0-9 and single hyphens, neither first nor last;
the same as the folder's name) and `description` (1-1024 characters, what the skill is and when to
use it), then Markdown. teachback marks the skills it writes with a `teachback-lesson` key in the
front matter's `metadata` (the format's place for a writer's own keys), so an export removes only
skills it wrote. Lesson text is the agents' and users' words, so nothing of it is trusted to be
well-formed: names are built from it as slugs, the description is one JSON-quoted line (a valid
YAML double-quoted scalar) holding no `---`, and the body is bounded.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from common.text import ELLIPSIS, clip, one_line
from feedback_store.redaction.redactor import Redactor

MAX_NAME, MAX_DESCRIPTION = 64, 1024
MAX_BODY_CHARS = 6000  # the format asks for a SKILL.md under 5000 tokens: it is read whole when used
MAX_ID_CHARS, MAX_PLACE_CHARS, MAX_QUOTED_CHARS = 20, 200, 300
MARKER_KEY = "teachback-lesson"
BEGIN, END = "<!-- teachback:lessons:begin -->", "<!-- teachback:lessons:end -->"
AGENTS_MD_LESSONS, AGENTS_MD_LINE_CHARS = 50, 400
AGENTS_MD_HEADING = "## Lessons from earlier sessions"
AGENTS_MD_INTRO = (
    "What went wrong before in this repository, and what fixed it. teachback keeps this part between "
    "its markers (`teachback lessons export --agents-md` rewrites it); the rest of the file is yours."
)
_NOT_SLUG = re.compile(r"[^a-z0-9]+")
_FENCE = re.compile(r"-{3,}")
_OURS = re.compile(rf"(?m)^metadata:[ \t]*\r?\n(?:[ \t]+\S.*\r?\n)*?[ \t]+{MARKER_KEY}:[ \t]*\S")


class SectionError(ValueError):
    """AGENTS.md holds teachback's markers in a way no one section can be found; the message says how to fix it."""


def redacted(rows: Iterable[dict[str, Any]], redactor: Redactor | None = None) -> list[dict[str, Any]]:
    """The rows with every field a skill or a section shows redacted, as exports redact (a person's own
    or edited lesson was never distilled, so it was never redacted before)."""
    redactor = redactor or Redactor()
    shown = ("text", "tool", "error_kind", "target")
    return [{**row, **{key: redactor.redact(row[key]) for key in shown if row.get(key)}} for row in rows]


# -- skills --------------------------------------------------------------------------------------


def skill_files(rows: Iterable[dict[str, Any]]) -> dict[str, str]:
    """Each lesson's skill: its name (also its folder's) and the text of its SKILL.md, in row order."""
    files: dict[str, str] = {}
    for row in rows:
        name = skill_name(row)
        if name in files:  # ids that differ only in case or punctuation (a hand-made team store)
            name = f"{name[: MAX_NAME - 4].rstrip('-')}-{len(files):03d}"
        files[name] = skill_markdown(row, name)
    return files


def skill_name(row: dict[str, Any]) -> str:
    """A name an agent can read (what the lesson is about) that is unique (it ends with the lesson's id)."""
    suffix = _slug(row["id"])[:MAX_ID_CHARS].strip("-") or "lesson"
    if row["origin"] == "user":
        about = row["text"][: MAX_NAME * 4]
    else:
        about = " ".join(filter(None, (row["tool"], row["error_kind"], (row["target"] or "")[:MAX_PLACE_CHARS])))
    stem = _slug(about)[: MAX_NAME - len(suffix) - 1].strip("-")
    return f"{stem}-{suffix}" if stem else suffix


def skill_markdown(row: dict[str, Any], name: str) -> str:
    front = [
        "---",
        f"name: {name}",
        f"description: {_scalar(description(row), MAX_DESCRIPTION)}",
        "metadata:",
        f"  {MARKER_KEY}: {_scalar(row['id'], MAX_NAME)}",
        "---",
    ]
    text = _plain(row["text"], keep_lines=True).strip()
    cut = f"\n\n(Cut at {MAX_BODY_CHARS} characters: `teachback lessons show {row['id']}` has all of it.)"
    body = [f"# {_title(row)}", "", clip(text, MAX_BODY_CHARS) + (cut if len(text) > MAX_BODY_CHARS else ""), ""]
    body.append(_source(row))
    return "\n".join(front) + "\n\n" + "\n".join(body) + "\n"


def description(row: dict[str, Any]) -> str:
    tool, target = row["tool"], row["target"]
    place = f" on {clip(target, MAX_PLACE_CHARS)}" if target else ""
    if row["origin"] == "user":
        when = (f", before calling {tool}" if tool else "") + (f", when working{place}" if target else "")
        rule = clip(row["text"].strip(), MAX_QUOTED_CHARS)
        stop = "" if rule.endswith((".", "!", "?", ELLIPSIS)) else "."
        return f"A rule the user set for this repository: {rule}{stop} Use it in this repository{when}."
    failed = f"{tool or 'a call'} failed ({row['error_kind'] or 'error'}){place}"
    seen = f"What worked in this repository after {failed}" if row["corrected"] else f"Why {failed} in this repository"
    return f"{seen}. Use it before calling {tool or 'that tool'}{place}."


def is_teachback_skill(text: str) -> bool:
    """Whether a SKILL.md's front matter carries teachback's marker in its metadata."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n") != "---":
        return False
    for end, line in enumerate(lines[1:], 1):
        if line.rstrip("\r\n") == "---":
            return bool(_OURS.search("".join(lines[1:end])))
    return False


def _title(row: dict[str, Any]) -> str:
    if row["origin"] == "user":
        return "A rule from the user"
    target = f" on {row['target']}" if row["target"] else ""
    return _plain(f"When {row['tool'] or 'a call'} fails ({row['error_kind'] or 'error'}){target}", limit=160)


def _source(row: dict[str, Any]) -> str:
    if row["origin"] == "user":
        return f"Pinned by the user with `teachback lessons pin` (lesson {row['id']})."
    times = f"{row['occurrences']} recorded failure{'s' if row['occurrences'] != 1 else ''}"
    return (
        f"teachback learned this from {times} in this repository ({row['corrected'] or 0} with a recorded fix); "
        f"`teachback lessons show {row['id']}` shows where."
    )


def _slug(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return _NOT_SLUG.sub("-", ascii_text.lower()).strip("-")


def _scalar(text: str, limit: int) -> str:
    """One line, quoted as JSON (which YAML reads as a double-quoted scalar), with no `---` in it: a
    front matter reader that splits the file at the first `---` after the opening one stays right."""
    return json.dumps(_FENCE.sub("--", _plain(text, limit=limit)), ensure_ascii=False)


def _plain(text: str, *, keep_lines: bool = False, limit: int | None = None) -> str:
    """`text` without control, format or unassigned characters (YAML refuses some raw, a terminal acts
    on others); line breaks kept as `\\n` when asked, else every whitespace run one space."""
    kept = []
    for char in text.replace("\r\n", "\n").replace("\r", "\n"):
        if char == "\n" and keep_lines:
            kept.append(char)
        elif char.isspace():
            kept.append(" ")
        elif not unicodedata.category(char).startswith("C"):
            kept.append(char)
    if keep_lines:
        return "".join(kept)
    return one_line("".join(kept), limit) if limit else " ".join("".join(kept).split())


# -- AGENTS.md -----------------------------------------------------------------------------------


def agents_section(rows: list[dict[str, Any]]) -> str:
    """teachback's section of AGENTS.md, markers included: one line per lesson, a person's own first."""
    lines = [BEGIN, AGENTS_MD_HEADING, "", AGENTS_MD_INTRO, ""]
    for row in rows[:AGENTS_MD_LESSONS]:
        who = "(from the user) " if row["origin"] == "user" else ""
        lines.append(f"- {who}{_unmarked(_plain(row['text'], limit=AGENTS_MD_LINE_CHARS))}")
    if len(rows) > AGENTS_MD_LESSONS:
        lines.append(f"- ... and {len(rows) - AGENTS_MD_LESSONS} more: `teachback lessons list` shows them all.")
    if not rows:
        lines.append("No lessons yet.")
    return "\n".join([*lines, END])


def with_section(existing: str | None, section: str) -> str:
    """`existing` (None: no file yet) with its teachback section replaced by `section`, or `section`
    added at its end; every character outside the section stays as it was."""
    if existing is None:
        return section + "\n"
    begins, ends = existing.count(BEGIN), existing.count(END)
    if begins == ends == 0:
        joint = "" if not existing else ("\n" if existing.endswith("\n") else "\n\n")
        return existing + joint + section + "\n"
    start, stop = existing.find(BEGIN), existing.find(END)
    if begins != 1 or ends != 1 or stop < start:
        raise SectionError(
            f"it holds {begins} `{BEGIN}` and {ends} `{END}` line(s){' (the end first)' if -1 < stop < start else ''}; "
            "keep exactly one of each, the begin marker first (or delete both to have the section added at the end)"
        )
    return existing[:start] + section + existing[stop + len(END) :]


def _unmarked(text: str) -> str:
    """A lesson line that cannot open or close an HTML comment, so it never forges the section's markers."""
    return text.replace("<!--", "< !--").replace("-->", "-- >")
