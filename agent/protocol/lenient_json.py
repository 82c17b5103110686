"""Reading JSON the way a weak model writes it: trailing commas, Python literals, a value cut off
before its closing brackets. Used by the text tool-calling parser (agent.protocol.textcalls); `loads_bounded`
is the strict reader every tool call's arguments go through."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

# Tool arguments are flat (strings, numbers, booleans); a limit far above that keeps the parsers
# (json's C scanner, ast) clear of the interpreter's recursion limit.
MAX_DEPTH = 64
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_OPENER = re.compile(r"[\[{]")


class Unreadable(Exception):
    """A block that tries to be a tool call but cannot be read; the message names the problem."""


class TooDeep(Unreadable, ValueError):
    """JSON nested deeper than MAX_DEPTH: refused before a parser recurses into it."""

    def __init__(self) -> None:
        super().__init__(
            f"the JSON nests arrays or objects more than {MAX_DEPTH} levels deep; tool arguments are one "
            "flat JSON object of strings, numbers and booleans"
        )


def loads_bounded(text: str) -> Any:
    """json.loads that raises TooDeep (a ValueError) for deeply nested text instead of running out of
    stack; other failures are json.JSONDecodeError or ValueError as usual."""
    check_depth(text)
    return json.loads(text)


def check_depth(text: str, limit: int = MAX_DEPTH) -> None:
    """Raise TooDeep when the brackets outside JSON strings nest deeper than `limit`."""
    if text.count("[") + text.count("{") <= limit:
        return
    depth = 0
    for ch in _NOT_BRACKET.sub("", _JSON_STRING.sub("", text)):
        depth = depth + 1 if ch in "[{" else max(0, depth - 1)
        if depth > limit:
            raise TooDeep()


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
    readings = (
        (repaired, lambda text: json.loads(text, strict=False)),
        (repaired, ast.literal_eval),
        (python, ast.literal_eval),
    )
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
    text ends first, the closers that would complete it. Raises TooDeep past MAX_DEPTH."""
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
            if len(stack) > MAX_DEPTH:
                raise TooDeep()
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return i + 1, ""
            if not stack:
                return i + 1, ""
    return len(text), (quote or "") + "".join(reversed(stack))


def next_open(text: str, pos: int) -> int:
    match = _OPENER.search(text, pos)  # one pass to the nearest bracket, not one to each kind
    return match.start() if match else -1


def skip_separators(text: str, pos: int) -> int:
    while pos < len(text) and (text[pos].isspace() or text[pos] == ","):
        pos += 1
    return pos
