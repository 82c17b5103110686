"""Split the editor's byte stream into LSP messages, and find the next message after a broken frame.

A frame is header lines (`Content-Length: N`, optionally `Content-Type`), a blank line, then N
bytes of JSON. pygls 2.1's reader matches only an exact `Content-Length: N\r\n` line; after any
other header it waits for a body that never comes, so one bad frame leaves the server deaf for
good, and a huge N makes it allocate N bytes. This parser reports a bad frame and resynchronises
on the next `Content-Length:` header instead.

Why resynchronising is safe: a JSON body can never hold a raw `Content-Length: 12` line (the
words would have to be inside a string, and a string cannot hold a raw line break), so such a line
inside a body means the body was shorter than declared and the next frame has started. The
parser cuts there at once rather than waiting for bytes that may never come.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

MAX_BODY = 64 * 1024 * 1024  # bytes; a larger Content-Length is a bad frame, never an allocation
MAX_HEADER = 8 * 1024  # bytes of header lines before the blank line

_TOKEN = b"content-length:"
_TOKEN_RE = re.compile(re.escape(_TOKEN), re.IGNORECASE)
_HEADER_AT = re.compile(rb"content-length:[ \t]*\d+[ \t]*\r?\n", re.IGNORECASE)
# Spellings looked for inside a partial body with a fast byte search (others are found only once
# the declared length has arrived and the body fails to parse).
_SPELLINGS = (b"Content-Length:", b"content-length:", b"CONTENT-LENGTH:")
_HEADER_LINE = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*")
_BLANK = re.compile(rb"[\r\n]*")
_HEADER_REACH = 80  # the last bytes of a partial body are searched again: a header may be cut off there


@dataclass(frozen=True)
class Message:
    """One well-framed body, parsed as JSON (any JSON value: the envelope is checked later)."""

    data: Any


@dataclass(frozen=True)
class BadFrame:
    """A frame whose headers or length could not be trusted; the parser resynchronised after it."""

    reason: str


@dataclass(frozen=True)
class NotJson:
    """A well-framed body that is not JSON: answered with a ParseError, framing is intact."""

    reason: str


Event = Message | BadFrame | NotJson


class FrameParser:
    """A sans-I/O parser: `feed` it bytes as they arrive, get back the messages they complete."""

    def __init__(self, max_body: int = MAX_BODY) -> None:
        self._max_body = max_body
        self._buffer = bytearray()
        self._length: int | None = None  # the declared body length, while reading a body
        self._scanned = 0  # bytes of the partial body already searched for a stray header
        self._resyncing = False

    @property
    def mid_frame(self) -> bool:
        """Whether bytes of an unfinished frame are waiting (at end of stream: it was cut off)."""
        return self._length is not None or bool(self._buffer.strip())

    def feed(self, data: bytes) -> list[Event]:
        self._buffer += data
        events: list[Event] = []
        while (event := self._step()) is not None:
            events.append(event)
        return events

    def _step(self) -> Event | None:
        """The next event the buffer completes, or None when more bytes are needed."""
        if self._resyncing and not self._skip_to_header():
            return None
        if self._length is None:
            header = self._parse_header()
            if not isinstance(header, int):
                return header
            self._length, self._scanned = header, 0
        return self._take_body(self._length)

    # -- headers ----------------------------------------------------------------------------

    def _parse_header(self) -> int | BadFrame | None:
        """The declared body length once the header block is complete, or why it is bad."""
        del self._buffer[: _BLANK.match(self._buffer).end()]  # blank lines between frames are harmless
        lengths: set[bytes] = set()
        start = 0
        while True:
            end = self._buffer.find(b"\n", start, MAX_HEADER + 1)
            if end < 0:
                too_long = len(self._buffer) > MAX_HEADER
                return self._bad(f"no end of headers within {MAX_HEADER} bytes") if too_long else None
            line = bytes(self._buffer[start:end]).rstrip(b"\r")
            start = end + 1
            if not line:
                break
            match = _HEADER_LINE.fullmatch(line)
            if match is None:
                return self._bad(f"a header line is not 'Name: value': {_show(line)!r}")
            if match.group(1).lower() == b"content-length":
                lengths.add(match.group(2))
        if not lengths:
            return self._bad("the header has no Content-Length")
        if len(lengths) > 1:
            return self._bad(f"conflicting Content-Length headers {', '.join(sorted(map(_show, lengths)))}")
        value = lengths.pop()
        if not value.isdigit():
            return self._bad(f"Content-Length {_show(value)!r} is not a whole number of bytes")
        if len(value) > 18 or int(value) > self._max_body:
            return self._bad(f"Content-Length {_show(value)} is over the {self._max_body} byte limit")
        del self._buffer[:start]
        return int(value)

    def _bad(self, reason: str) -> BadFrame:
        # Drop one byte, then search forward: the next Content-Length may sit inside this very block.
        del self._buffer[:1]
        self._resyncing = True
        return BadFrame(reason)

    def _skip_to_header(self) -> bool:
        match = _TOKEN_RE.search(self._buffer)
        if match is None:
            del self._buffer[: max(0, len(self._buffer) - len(_TOKEN) + 1)]  # keep a split token
            return False
        del self._buffer[: match.start()]
        self._resyncing = False
        return True

    # -- bodies -----------------------------------------------------------------------------

    def _take_body(self, length: int) -> Event | None:
        if len(self._buffer) < length:
            stray = self._stray_header()
            if stray is None:
                return None
            del self._buffer[:stray]
            return self._ended_early(stray, length)
        body = bytes(self._buffer[:length])
        del self._buffer[:length]
        self._length = None
        try:
            return Message(json.loads(body))
        except (ValueError, RecursionError) as exc:
            restart = _next_header_in(body)
            if restart is None:
                return NotJson(f"the body is not JSON ({exc})")
            self._buffer[:0] = body[restart:]
            return self._ended_early(restart, length)

    def _stray_header(self) -> int | None:
        """Where a whole `Content-Length: N` line starts in the partial body, if one does."""
        start, self._scanned = self._scanned, max(0, len(self._buffer) - _HEADER_REACH)
        found = [at for spelling in _SPELLINGS if (at := self._header_line(spelling, start)) is not None]
        return min(found, default=None)

    def _header_line(self, spelling: bytes, start: int) -> int | None:
        at = self._buffer.find(spelling, start)
        while at >= 0 and not _HEADER_AT.match(self._buffer, at):
            at = self._buffer.find(spelling, at + 1)
        return at if at >= 0 else None

    def _ended_early(self, at: int, length: int) -> BadFrame:
        """The body ended at `at`, where the next frame's header begins (the buffer starts there)."""
        self._length = None
        return BadFrame(f"the frame held {at} bytes, not its Content-Length {length}; the next header began there")


def _next_header_in(body: bytes) -> int | None:
    """Where a header starts inside an unparsable body, or where its last bytes begin one."""
    match = _TOKEN_RE.search(body)
    if match is not None:
        return match.start()
    tail = body[-(len(_TOKEN) - 1) :].lower()
    for size in range(len(tail), 0, -1):
        if _TOKEN.startswith(tail[-size:]):
            return len(body) - size
    return None


def _show(raw: bytes) -> str:
    """A short printable excerpt of header bytes, for the log."""
    return raw[:40].decode("utf-8", "backslashreplace")
