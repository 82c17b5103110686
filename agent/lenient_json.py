"""Reading JSON the way a weak model writes it: trailing commas, Python literals, a value cut off
before its closing brackets. Used by the text tool-calling parser (agent.textcalls)."""

from __future__ import annotations

import ast
import json
import re
from typing import Any


class Unreadable(Exception):
    """A block that tries to be a tool call but cannot be read; the message names the problem."""


def load_json_at(text: str, pos: int) -> tuple[Any, int]:
    """The JSON value starting at text[pos] and where it ends. Accepts Python literals, trailing
    commas, and a value cut off before its closing brackets; raises Unreadable otherwise."""
    end, closers = balanced_end(text, pos)
    if closers[:1] in ("'", '"'):
        raise Unreadable("the reply ends inside a string, so the call was cut off before it was complete")
    snippet = text[pos:end] + closers
    try:
        return json.loads(snippet, strict=False), end
    except json.JSONDecodeError as exc:
        first_error = exc
    repaired = re.sub(r",\s*([}\]])", r"\1", snippet)
    python = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", re.sub(r"\bnull\b", "None", repaired)))
    # Lenient readings in turn: trailing commas dropped, then Python literals (single quotes, True).
    readings = ((repaired, lambda text: json.loads(text, strict=False)), (repaired, ast.literal_eval),
                (python, ast.literal_eval))
    for candidate, read in readings:
        try:
            value = read(candidate)
        except (ValueError, SyntaxError, MemoryError, RecursionError):  # JSONDecodeError is a ValueError
            continue
        if isinstance(value, (dict, list)):
            return json.loads(json.dumps(value, default=str)), end
    raise Unreadable(
        f"the call is not valid JSON ({first_error.msg} at line {first_error.lineno} column {first_error.colno})"
    )


def balanced_end(text: str, pos: int) -> tuple[int, str]:
    """(end, missing closers): the end of the bracketed value at `pos`, string-aware; when the
    text ends first, the closers that would complete it."""
    stack: list[str] = []
    quote: str | None = None
    escaped = False
    for i in range(pos, len(text)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return i + 1, ""
            if not stack:
                return i + 1, ""
    return len(text), (quote or "") + "".join(reversed(stack))


def next_open(text: str, pos: int) -> int:
    hits = [i for i in (text.find("{", pos), text.find("[", pos)) if i >= 0]
    return min(hits) if hits else -1


def skip_separators(text: str, pos: int) -> int:
    while pos < len(text) and (text[pos].isspace() or text[pos] == ","):
        pos += 1
    return pos
