"""The lines of another agent's log file, each read once, with bounds, and checked against the shape
its importer expects.

A log on disk is untrusted text: it may be a named pipe that never ends, hold a line of a gigabyte or
one nested a hundred thousand levels deep, or put a list where the format has a string. Every line goes
through `log_lines`, which yields only JSON objects whose declared fields have the declared types; any
other line is a `BadLine` (its number and what is wrong with it) for the importer to count and name, so
one bad line never stops the rest of the file, or of the folder, from being imported.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from agent.protocol.arguments import json_type
from agent.protocol.lenient_json import TooDeep, check_depth

MAX_LINE_BYTES = 64 * 2**20  # Claude Code keeps whole file contents in a line; far more is not a log
MAX_DEPTH = 200  # the logs nest a few levels (a tool's input inside a message); well below the parser's limit
MAX_COUNT = 2**53  # token counts and exit codes past this are not counts (and would not fit a column)


class NotALogFile(OSError):
    """The path is not a regular file (a named pipe, a socket, a device, a folder): it is not read."""


@dataclass(frozen=True)
class Check:
    """What a field must be, in words (for the message) and as a test."""

    what: str
    test: Callable[[Any], bool]


@dataclass(frozen=True)
class BadLine:
    number: int
    reason: str  # the class of problem, counted in the summary
    detail: str  # what is wrong with this line, named in the summary


TEXT = Check("a string", lambda v: isinstance(v, str))
OBJECT = Check("an object", lambda v: isinstance(v, dict))
TEXT_OR_LIST = Check("a string or a list", lambda v: isinstance(v, (str, list)))
COUNT = Check("a whole number from 0, or null", lambda v: v is None or (type(v) is int and 0 <= v < MAX_COUNT))
TIME = Check(
    "a time (ISO 8601 text, or seconds since 1970)",
    lambda v: isinstance(v, str) or (type(v) in (int, float) and math.isfinite(v) and abs(v) < MAX_COUNT),
)


def nullable(check: Check) -> Check:
    """`check`, or null (a format whose optional fields may be written as null)."""
    return Check(f"{check.what}, or null", lambda v: v is None or check.test(v))


LIST = Check("a list", lambda v: isinstance(v, list))
BOOL = Check("true or false", lambda v: isinstance(v, bool))

# A dotted path ("message.usage.output_tokens"; "*" is every item of a list) -> what it must be when present.
Shape = Mapping[str, Check]

NOT_AN_OBJECT = "lines that are not JSON objects"
TOO_LONG = "lines too long to read"
TOO_DEEP = "lines nested too deep"
WRONG_SHAPE = "lines with a field of the wrong type"


def open_log(path: Path) -> BinaryIO:
    """Open a log for reading, refusing anything but a regular file. The open cannot block (a named
    pipe with no writer would wait forever) and the type is checked on what was opened, so a path
    swapped for a pipe after a check is still refused."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotALogFile(not_regular(path, info.st_mode))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def not_regular(path: Path, mode: int) -> str:
    """Why a path that is not a regular file was not read, naming it."""
    return f"{path}: it is {_kind(mode)}, not a regular file (only regular files are read as logs)"


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "a special file"


def log_lines(path: Path, shape: Shape) -> Iterator[tuple[int, dict[str, Any] | BadLine]]:
    """Each non-blank line's number and its JSON object, or a BadLine saying why it was not read."""
    with open_log(path) as handle:
        number = 0
        while line := handle.readline(MAX_LINE_BYTES + 1):
            number += 1
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                while (rest := handle.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                    pass  # the rest of the line, read in bounded pieces and dropped
                yield number, BadLine(number, TOO_LONG, f"longer than {MAX_LINE_BYTES // 2**20} MB")
                continue
            text = line.decode("utf-8", errors="replace")
            if text.strip():
                yield number, read_line(number, text, shape)


def read_line(number: int, text: str, shape: Shape) -> dict[str, Any] | BadLine:
    """One line's JSON object, parsed with bounds and checked against `shape`."""
    try:
        check_depth(text, MAX_DEPTH)
        value = json.loads(text)
    except TooDeep:
        return BadLine(number, TOO_DEEP, f"nested more than {MAX_DEPTH} levels deep")
    except json.JSONDecodeError as exc:
        return BadLine(number, NOT_AN_OBJECT, f"not JSON ({exc.msg.removesuffix(' at')} at column {exc.colno})")
    except (ValueError, RecursionError) as exc:  # e.g. an integer of more digits than Python converts
        return BadLine(number, NOT_AN_OBJECT, f"not readable JSON ({str(exc).split(':')[0]})")
    if not isinstance(value, dict):
        return BadLine(number, NOT_AN_OBJECT, f"{_a(value)}, not a JSON object")
    problem = shape_problem(value, shape)
    if problem is not None:
        return BadLine(number, WRONG_SHAPE, problem)
    return value


def shape_problem(entry: dict[str, Any], shape: Shape) -> str | None:
    """The first declared field that is present with the wrong type, in words; None if all fit."""
    for path, check in shape.items():
        for where, value in _found(entry, path.split("."), ""):
            if not check.test(value):
                return f"`{where}` is {_a(value)}, not {check.what}"
    return None


def _a(value: Any) -> str:
    """A value's JSON type with its article, and a scalar's value: "a string 'lots'", "an array"."""
    name = json_type(value)
    if name == "null":
        return "null"
    article = "an" if name[0] in "aeiou" else "a"
    if isinstance(value, (list, dict)):
        return f"{article} {name}"
    shown = repr(value) if not isinstance(value, str) or len(value) <= 40 else repr(value[:40]) + "..."
    return f"{article} {name} {shown}"


def _found(value: Any, steps: list[str], where: str) -> Iterator[tuple[str, Any]]:
    """The values at a dotted path (every item where a step is "*"), with where each was found."""
    if not steps:
        yield where, value
        return
    step, rest = steps[0], steps[1:]
    if step == "*":
        if isinstance(value, list):
            for index, item in enumerate(value):
                yield from _found(item, rest, f"{where}[{index}]")
    elif isinstance(value, dict) and step in value:
        yield from _found(value[step], rest, f"{where}.{step}" if where else step)
