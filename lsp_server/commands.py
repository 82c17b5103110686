"""The `workspace/executeCommand` surface: names, and argument parsing into typed requests.

pygls answers nothing when a message's params do not fit its schema, so every command takes its
raw arguments and validates them here: a bad argument is an `InvalidParams` error response whose
message shows the shape to send.

Each command takes one object argument (`[{"instruction": "..."}]`); for key bindings, `ask`
also takes a bare string and `accept` / `reject` take `[id]` or `[id, reason]`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

ASK = "teachback.ask"
ACCEPT = "teachback.accept"
REJECT = "teachback.reject"
UNDO = "teachback.undo"
CANCEL = "teachback.cancel"
STATUS = "teachback.status"
ALL = (ASK, ACCEPT, REJECT, UNDO, CANCEL, STATUS)

ASK_SHAPE = '{"instruction": str, "uri"?: str, "range"?: {"start": {"line", "character"}, "end": {...}}}'
REVIEW_SHAPE = '{"id": str, "reason"?: str}'


class RequestFailed(JsonRpcException):
    """The request was well formed but could not be done now; the message says what to do."""

    CODE = types.LSPErrorCodes.RequestFailed.value
    MESSAGE = "Request Failed"


@dataclass(frozen=True)
class AskRequest:
    instruction: str
    uri: str | None = None
    range: types.Range | None = None
    diagnostics: tuple[str, ...] = ()  # already rendered, one line each


@dataclass(frozen=True)
class ReviewRequest:
    id: str  # an approval request id, an edit id, or a file URI / workspace path
    reason: str | None = None


def parse_ask(args: tuple[Any, ...]) -> AskRequest:
    if len(args) == 1 and isinstance(args[0], str):
        args = ({"instruction": args[0]},)
    data = _single_object(ASK, args, ASK_SHAPE)
    _no_unknown_keys(ASK, data, {"instruction", "uri", "range", "diagnostics"}, ASK_SHAPE)
    instruction = data.get("instruction")
    if not isinstance(instruction, str) or not instruction.strip():
        raise _invalid(ASK, "'instruction' must be a non-empty string", ASK_SHAPE)
    uri = data.get("uri")
    if uri is not None and (not isinstance(uri, str) or ":" not in uri):
        raise _invalid(ASK, f"'uri' must be a document URI such as file:///path/app.py, got {uri!r}", ASK_SHAPE)
    text_range = parse_range(data["range"], ASK) if data.get("range") is not None else None
    if text_range is not None and uri is None:
        raise _invalid(ASK, "'range' needs the 'uri' of the document it is in", ASK_SHAPE)
    diagnostics = data.get("diagnostics") or []
    if not isinstance(diagnostics, list) or not all(isinstance(d, str) for d in diagnostics):
        raise _invalid(ASK, "'diagnostics' must be a list of strings", ASK_SHAPE)
    return AskRequest(instruction.strip(), uri, text_range, tuple(diagnostics))


def parse_review(command: str, args: tuple[Any, ...]) -> ReviewRequest:
    if args and all(isinstance(a, str) for a in args) and len(args) <= 2:
        args = ({"id": args[0], **({"reason": args[1]} if len(args) == 2 else {})},)
    data = _single_object(command, args, REVIEW_SHAPE)
    _no_unknown_keys(command, data, {"id", "reason"}, REVIEW_SHAPE)
    ident = data.get("id")
    if not isinstance(ident, str) or not ident.strip():
        raise _invalid(command, "'id' must be a non-empty string (an edit id, approval id or file URI)", REVIEW_SHAPE)
    reason = data.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise _invalid(command, f"'reason' must be a string, got {reason!r}", REVIEW_SHAPE)
    return ReviewRequest(ident.strip(), (reason or "").strip() or None)


def parse_no_arguments(command: str, args: tuple[Any, ...]) -> None:
    if args and args != ({},) and args != (None,):
        raise _invalid(command, f"it takes no arguments, got {list(args)!r}", "no arguments")


def parse_range(raw: Any, command: str) -> types.Range:
    if not isinstance(raw, dict) or not isinstance(raw.get("start"), dict) or not isinstance(raw.get("end"), dict):
        raise _invalid(command, f"'range' must have 'start' and 'end' positions, got {raw!r}", ASK_SHAPE)
    start, end = (_position(raw[key], command) for key in ("start", "end"))
    if (end.line, end.character) < (start.line, start.character):
        raise _invalid(command, "'range' ends before it starts", ASK_SHAPE)
    return types.Range(start=start, end=end)


def line_span(text_range: types.Range) -> tuple[int, int]:
    """The 1-based, inclusive lines a range covers (a range ending at a line's start excludes it)."""
    start, end = text_range.start, text_range.end
    last = end.line if end.character == 0 and end.line > start.line else end.line + 1
    return start.line + 1, max(start.line + 1, last)


def _position(raw: dict[str, Any], command: str) -> types.Position:
    line, character = raw.get("line"), raw.get("character")
    for name, value in (("line", line), ("character", character)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _invalid(command, f"position {name!r} must be a whole number >= 0, got {value!r}", ASK_SHAPE)
    return types.Position(line=line, character=character)


def _single_object(command: str, args: tuple[Any, ...], shape: str) -> dict[str, Any]:
    if len(args) != 1 or not isinstance(args[0], dict):
        got = "no arguments" if not args else f"{list(args)!r}"
        raise _invalid(command, f"it takes one object argument, got {got}", shape)
    return args[0]


def _no_unknown_keys(command: str, data: dict[str, Any], known: set[str], shape: str) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise _invalid(command, f"unknown key(s) {', '.join(map(repr, unknown))}", shape)


def _invalid(command: str, problem: str, shape: str) -> JsonRpcInvalidParams:
    return JsonRpcInvalidParams(f"{command}: {problem}. Send [{shape}].")
