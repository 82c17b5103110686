"""The wire under `teachback acp`: JSON-RPC lines read with bounds and checked before the protocol
library sees them.

The library's own reader trusts every line: one that holds `null`, a list or a number stops its
receive loop, and with it every session the editor has open; `"method": null` passes for a response
and is never answered; a line that is not JSON is logged and its request never answered; a line has
no size bound, and an id that is a list or an object in a response crashes the loop. This transport
(the library's message-level `Transport`) hands the library only requests, notifications and
responses it can handle, and answers everything else itself, with the request's id exactly as sent
when it carried one (-32600 Invalid Request, or -32700 Parse error for text that is not JSON). A
notification the agent does not take and a malformed one are logged and dropped (JSON-RPC answers
no notification), and the params' `_meta` is removed before the library spreads it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

LINE_LIMIT = 50 * 1024 * 1024  # bytes in one line: a message can carry whole files (fs/*, diffs)
MAX_DEPTH = 100  # nesting of one message; ACP's own structures stay under 10
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INTERNAL_ERROR = -32603
ID_SCAN_LIMIT = 1_000_000  # tokens searched for the id of a message too deep to parse
NOTIFICATIONS = {"session/cancel"}  # the only notification the agent takes; the library logs others as errors

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:,]')


@dataclass(frozen=True)
class Deliver:
    """A message the library can handle."""

    message: dict[str, Any]


@dataclass(frozen=True)
class Refuse:
    """An error response to send back instead of handing the message on."""

    answer: dict[str, Any]


@dataclass(frozen=True)
class Drop:
    """A message nobody waits for an answer to (a notification or a response): logged and skipped."""

    reason: str


Verdict = Deliver | Refuse | Drop


def error(msg_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def classify(line: bytes) -> Verdict:
    """What to do with one line from the editor (without its newline; not blank)."""
    try:
        data = json.loads(line, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        return Refuse(error(_shallow_id(line), INVALID_REQUEST, _too_deep()))
    except ValueError as exc:  # UnicodeDecodeError included
        return Refuse(
            error(None, PARSE_ERROR, f"the line is not JSON ({_short(exc)}); send one JSON-RPC object per line")
        )
    if not isinstance(data, dict):
        return Refuse(error(None, INVALID_REQUEST, _not_an_object(data)))
    if _is_response(data):
        return _response(data)
    problem = _depth_problem(data) or _request_problem(data)
    if "id" in data:
        return Deliver(_without_meta(data)) if problem is None else Refuse(error(data["id"], INVALID_REQUEST, problem))
    problem = problem or _notification_problem(data)
    return Deliver(_without_meta(data)) if problem is None else Drop(problem)


def _is_response(data: dict[str, Any]) -> bool:
    return "method" not in data and "id" in data and ("result" in data or "error" in data)


def _response(data: dict[str, Any]) -> Verdict:
    """The editor's answer to one of the agent's requests, whose ids are whole numbers."""
    msg_id = data["id"]
    if not isinstance(msg_id, int) or isinstance(msg_id, bool):
        return Drop(f"a response with id {_short(msg_id)}, which no request of the agent carries")
    problem = _depth_problem(data)
    if problem is None and "result" not in data:
        problem = _error_problem(data["error"])
    if problem is None:
        return Deliver(data)
    # The request it answers still fails, with the reason, rather than waiting for ever.
    return Deliver(error(msg_id, INTERNAL_ERROR, f"the editor's answer was malformed: {problem}"))


def _error_problem(value: Any) -> str | None:
    if not isinstance(value, dict):
        return f'"error" must be an object, not {_kind(value)}'
    code, message = value.get("code"), value.get("message")
    if not isinstance(code, int) or isinstance(code, bool) or not isinstance(message, str):
        return '"error" needs a whole-number "code" and a string "message"'
    return None


def _request_problem(data: dict[str, Any]) -> str | None:
    if data.get("jsonrpc") != "2.0":
        return 'the message lacks "jsonrpc": "2.0"; every JSON-RPC 2.0 message carries it'
    if "method" not in data:
        return 'the message has no "method"; a request names the method it calls'
    if not isinstance(data["method"], str):
        return f'"method" must be a string, not {_kind(data["method"])}'
    return None


def _notification_problem(data: dict[str, Any]) -> str | None:
    """Why the library could not handle a notification (it would log a traceback, and answer nothing)."""
    if data["method"] not in NOTIFICATIONS:
        return f"the agent takes no notification {_short(data['method'])!r}"
    params = data.get("params")
    if not isinstance(params, dict) or not isinstance(params.get("sessionId"), str):
        return f'{data["method"]} needs params {{"sessionId": "<a session id>"}}'
    return None


def _without_meta(data: dict[str, Any]) -> dict[str, Any]:
    """The message without its params' `_meta`: the library spreads that object's keys among the
    handler's arguments, where a key such as `cwd` or `session_id` would replace the real argument,
    and teachback reads nothing from it."""
    params = data.get("params")
    if not isinstance(params, dict) or "_meta" not in params:
        return data
    return {**data, "params": {key: value for key, value in params.items() if key != "_meta"}}


def _depth_problem(data: Any) -> str | None:
    """Why `data` nests too deep, or None; walked without recursion, since depth is what is checked."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return _too_deep()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return None


def _shallow_id(line: bytes) -> Any:
    """The top-level id of an object too deep to parse, when it can be read without the rest; else None."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return None
    depth, previous = 0, ""
    for count, match in enumerate(_TOKEN.finditer(text)):
        token = match.group()
        if count > ID_SCAN_LIMIT or (count == 0 and token != "{"):
            return None
        if depth == 1 and token == ":" and previous == '"id"':
            try:
                value, _ = _DECODER.raw_decode(text, _skip_space(text, match.end()))
            except (ValueError, RecursionError):
                return None
            return value if _depth_problem([value]) is None else None
        if token in ("{", "["):
            depth += 1
        elif token in ("}", "]"):
            depth -= 1
        if depth == 1:  # the last token of the top-level object: a key is followed by ":"
            previous = token
    return None


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"the number {text[:40]} is out of range")
    return value


_DECODER = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)


def _too_deep() -> str:
    return f"the message nests deeper than {MAX_DEPTH} levels; no ACP message needs that many"


def _not_an_object(data: Any) -> str:
    if isinstance(data, list):
        return "ACP takes one JSON-RPC object per line and no batches; send each message on its own line"
    return f"a message must be a JSON object, not {_kind(data)}; send one JSON-RPC object per line"


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 80 else text[:77] + "..."


class LineTransport:
    """ACP's message-level transport over newline-delimited JSON, with every line checked by `classify`."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader  # its limit bounds a line: LINE_LIMIT in the server
        self._writer = writer
        self._lock = asyncio.Lock()

    async def receive(self) -> dict[str, Any] | None:
        while (verdict := await self._next()) is not None:
            if isinstance(verdict, Deliver):
                return verdict.message
            if isinstance(verdict, Refuse):
                log.warning("answered a malformed message: %s", verdict.answer["error"]["message"])
                await self.send(verdict.answer)
            else:
                log.warning("dropped a malformed message: %s", verdict.reason)
        return None

    async def send(self, message: dict[str, Any]) -> None:
        try:
            data = json.dumps(message, separators=(",", ":"), allow_nan=False, default=str)
        except (ValueError, RecursionError) as exc:
            log.error("could not encode a message for the editor: %s", exc)
            if "id" not in message:  # a notification: nobody waits for it
                return
            # A request still gets its answer: an error saying why its result is missing.
            data = json.dumps(error(message["id"], INTERNAL_ERROR, f"the answer could not be encoded: {exc}"))
        async with self._lock:
            self._writer.write(data.encode() + b"\n")
            await self._writer.drain()

    async def close(self) -> None:
        """Nothing to release: the output belongs to the server, which may still log after the session."""

    async def _next(self) -> Verdict | None:
        """The verdict on the next non-blank line; None at the end of input."""
        while True:
            try:
                line = await self._reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:  # the last line, without its newline
                line = exc.partial
                if not line.strip():
                    return None
            except asyncio.LimitOverrunError as exc:
                await self._skip_line(exc.consumed)
                return Refuse(_too_long())
            if line.strip():
                return classify(line.strip())

    async def _skip_line(self, skip: int) -> None:
        """Drop the rest of an over-long line as it arrives, never holding more than the reader's limit."""
        while True:
            try:
                await self._reader.readexactly(skip)
                await self._reader.readuntil(b"\n")
                return
            except asyncio.IncompleteReadError:
                return
            except asyncio.LimitOverrunError as exc:
                skip = exc.consumed


def _too_long() -> dict[str, Any]:
    return error(None, INVALID_REQUEST, f"a line over {LINE_LIMIT} bytes was dropped; no ACP message needs that much")
