"""A tool call's arguments as the model sent them, read once, with bounds.

The model's argument text is untrusted: it may be megabytes long, nest brackets a hundred thousand
levels deep, hold an integer of thousands of digits, or not be JSON at all. `read_arguments` is the
one reader of that text: the session reads each call once, the tools check the result, and the
events carry it (`ToolCallStarted.args`, or `args_error` saying why there is none), so nothing
downstream (the monitor, lessons, corrections, rewards, exports) runs a parser on raw model text.
Stored text from before the events carried it goes through the same reader.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agent.protocol.lenient_json import TooDeep, loads_bounded

MAX_ARGUMENTS_CHARS = 1_000_000  # one call's arguments text; more is refused before parsing


@dataclass(frozen=True)
class Arguments:
    """The JSON object the model sent (`value`), or why its text is not one within the bounds:
    `problem` (a clause for the model, after "The arguments for TOOL"), `kind` (the error kind it
    is) and `hint` (what to send instead)."""

    value: dict[str, Any] | None
    problem: str | None = None
    kind: str | None = None
    hint: str = ""


FLAT = "Send one flat JSON object of strings, ordinary numbers and booleans."


def read_arguments(raw: Any) -> Arguments:
    """Read a call's argument text: empty text is no arguments; anything over the size, depth or
    number bounds, not JSON, or not an object is a problem, never an exception."""
    if isinstance(raw, dict):  # already read (a provider that hands over objects)
        return Arguments(raw)
    if not isinstance(raw, str):
        return Arguments(None, f"are {json_type(raw)}, not JSON text", "malformed_json")
    if len(raw) > MAX_ARGUMENTS_CHARS:
        return Arguments(
            None,
            f"are {len(raw):,} characters, over the {MAX_ARGUMENTS_CHARS:,}-character limit for one call, so "
            "nothing was run",
            "bad_arguments",
            "Send less at once: write a big file as create_file with its first part and edit_file calls that "
            "append the rest, and use read_file or search instead of quoting whole files.",
        )
    if not raw.strip():
        return Arguments({})
    try:
        value = loads_bounded(raw)
    except json.JSONDecodeError as exc:
        return Arguments(
            None,
            f"are not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})",
            "malformed_json",
            "Send one JSON object, with strings quoted and newlines escaped as \\n.",
        )
    except TooDeep as exc:
        return Arguments(None, f"cannot be read: {exc}", "malformed_json")
    except (ValueError, RecursionError, MemoryError) as exc:  # e.g. an integer of thousands of digits
        return Arguments(None, f"cannot be read: {str(exc).split(':')[0]}", "malformed_json", FLAT)
    if not isinstance(value, dict):
        return Arguments(None, f"must be a JSON object, got {json_type(value)}", "malformed_json")
    return Arguments(value)


def arguments_or_text(raw: Any) -> dict[str, Any] | str:
    """The arguments as a dict when they read as a JSON object, else the raw text as sent."""
    value = read_arguments(raw).value
    return value if value is not None else ("" if raw is None else raw if isinstance(raw, str) else str(raw))


def value_or_text(text: str) -> Any:
    """Model text's JSON value (any type) when it reads within the bounds, else the text itself."""
    if len(text) > MAX_ARGUMENTS_CHARS:
        return text
    try:
        return loads_bounded(text)
    except (ValueError, RecursionError, MemoryError):  # JSONDecodeError and TooDeep are ValueErrors
        return text


def json_type(value: Any) -> str:
    """The JSON name of a parsed value's type."""
    for py_type, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string")):
        if isinstance(value, py_type):
            return name
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) else "null"
