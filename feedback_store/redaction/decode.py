"""Encoded copies of secrets: the segments of a text that may be base64, percent-encoding or
`\\uXXXX` / `\\xXX` escapes, decoded so the rules can read them (as gitleaks does).

Decoding is tried only where a text offers a candidate: a long run of the base64 alphabet (also
one wrapped over lines of equal length), a run holding `%XX` sequences, a run holding `\\u00XX`
escapes. Base64 that decodes to anything but readable text (most base64: images, hashes, random
bytes) is dropped at once. Each segment carries where its decoded characters came from, so a
secret found in it is redacted in its encoded form.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

MIN_BASE64 = 16  # 12 bytes: `PASSWORD=abc` is the shortest credential worth decoding
MIN_DECODED = 8
MAX_SEGMENT = 1_000_000  # characters; a larger encoded run is not decoded
# A run of the base64 alphabet (standard or URL-safe), found with one cheap scan of the words.
BASE64_ALPHABET_RUN = re.compile(r"[A-Za-z0-9+/_\-]{16,}={0,2}")
# Base64 of text: in each group of four characters the first three carry the top bits of three
# bytes, which are 0 in ASCII, so they come from halves of the alphabet. Most runs of the alphabet
# in code (`assert_called_once_with`, paths, hashes) fail within their first groups.
_ASCII_GROUP = r"[A-Za-f][A-HQ-Xg-nw-z0-3][ABEFIJMNQRUVYZcdghklopstwx014589][A-Za-z0-9+/_\-]"
BASE64_TEXT = re.compile(rf"(?:{_ASCII_GROUP}){{4,}}(?:[A-Za-z0-9+/_\-]{{2,3}}(?![A-Za-z0-9+/_\-]))?={{0,2}}")
# The hex of a character that may stand for text (_stands_for_text): no control character, no
# non-character (U+FFFE, U+FFFF); of two digits and of four.
_TEXT_HEX2 = r"0[9Aa]|[2-7A-Fa-f][0-9A-Fa-f]"
_TEXT_HEX4 = (
    rf"00(?:{_TEXT_HEX2})|0[1-9A-Fa-f][0-9A-Fa-f]{{2}}|[1-9A-Ea-e][0-9A-Fa-f]{{3}}"
    r"|[Ff](?:[0-9A-Ea-e][0-9A-Fa-f]{2}|[Ff](?:[0-9A-Ea-e][0-9A-Fa-f]|[Ff][0-9A-Da-d]))"
)
_TEXT_ESCAPE = rf"(?:u(?:{_TEXT_HEX4})|x(?:{_TEXT_HEX2}))"  # after its backslash
_TEXT_PERCENT = f"%(?:{_TEXT_HEX2})"
_RUN_CHAR = r"[^ \t\r\n\"'<>`\\]"  # a character a run of encoded text may hold before its first hit

# Where each pass may find something, without lookarounds (redact's one-pass prefilter, which
# skips a pass whose trigger a text does not match): what BASE64_TEXT needs at the start of a run
# of the alphabet (or one character in, after a JSON escape's backslash); a `%XX` or an escape that
# may stand for text with a character of its run before or after it (one alone, 3 to 7
# characters, decodes to less than MIN_DECODED).
BASE64_TRIGGER = rf"(?:^|[^A-Za-z0-9+/_\-])[nrt]?(?:{_ASCII_GROUP}){{4}}"
PERCENT_TRIGGER = rf"{_RUN_CHAR}{_TEXT_PERCENT}|{_TEXT_PERCENT}[^\s\"'<>`\\]"
ESCAPE_TRIGGER = rf"{_RUN_CHAR}\\?\\{_TEXT_ESCAPE}|\\{_TEXT_ESCAPE}[^\s\"'<>`]"
MIN_WRAPPED_LINE = 40
BASE64_WRAPPED = re.compile(
    r"(?:(?<![A-Za-z0-9+/=\\])|(?<=\\[nrt]))(?:[A-Za-z0-9+/]{40,120}(?:\r?\n|(?:\\r)?\\n))+[A-Za-z0-9+/]{0,120}={0,2}"
)
LINE_BREAK = re.compile(r"\r?\n|(?:\\r)?\\n")
TRAILING_BREAK = re.compile(f"(?:{LINE_BREAK.pattern})$")
PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
PERCENT_RUN = re.compile(r"(?:[^\s\"'<>`\\%]|%[0-9A-Fa-f]{2}|%)*")
# Where a run may start: an encoded character that may stand for text (a JSON-escaped escape too).
PERCENT_HIT = re.compile(_TEXT_PERCENT)
ESCAPE_HIT = re.compile(rf"\\\\?{_TEXT_ESCAPE}")
ESCAPE_RUN = re.compile(r"(?:\\\\?(?:u[0-9A-Fa-f]{4}|x[0-9A-Fa-f]{2}|[nrt\"'/\\])|[^\s\"'<>`\\])*")
ESCAPE_UNIT = re.compile(r"\\\\?(?:u[0-9A-Fa-f]{4}|x[0-9A-Fa-f]{2}|.)|.", re.DOTALL)
SIMPLE_ESCAPES = {"n": "\n", "r": "\r", "t": "\t"}
MAX_RUN_BEFORE = 4096  # how far back from its first escape a run is looked for
RUN_BEFORE = re.compile(f"{_RUN_CHAR}*")


@dataclass(frozen=True)
class Segment:
    start: int
    end: int
    decoded: str
    # offsets[i]: where decoded character i starts in the text, and offsets[-1] the segment's end;
    # None: the characters cannot be told apart (base64), so any secret in it is the whole segment.
    offsets: tuple[int, ...] | None

    def span(self, start: int, end: int) -> tuple[int, int]:
        if self.offsets is None:
            return self.start, self.end
        return self.offsets[start], self.offsets[end]


def segments(text: str, words: list[str], percent: bool, escapes: bool) -> Iterator[Segment]:
    """The encoded segments of `text`, decoded: base64 that decodes to readable text, runs of
    percent-encoding or escapes of which one at least stands for text. `words` are the text's
    whitespace-separated words of MIN_BASE64 characters or more (none: no base64 is looked for);
    `percent` and `escapes`: whether the text may hold those (see `may_hold`)."""
    if words:
        yield from _base64_segments(text, words)
    if percent:
        yield from _runs(text, PERCENT_HIT, PERCENT_RUN, _percent_decode)
    if escapes:
        yield from _runs(text, ESCAPE_HIT, ESCAPE_RUN, _unescape)


def may_hold(text: str) -> tuple[bool, bool]:
    """Whether `text` may hold percent-encoding, and escapes: the test where no trigger was read."""
    return "%" in text, "\\u" in text or "\\x" in text


def _base64_segments(text: str, words: list[str]) -> Iterator[Segment]:
    found = [m.group() for run in BASE64_ALPHABET_RUN.findall("\n".join(words)) if (m := _base64_text_in(run))]
    blocks: list[str] = []
    in_blocks: set[str] = set()  # the lines of the blocks found, each decoded with its block
    for run in found:
        if len(run) >= MIN_WRAPPED_LINE and len(run) % 4 == 0 and run not in in_blocks:  # a first line?
            for block in _wrapped([BASE64_WRAPPED.match(text, text.find(run))]):
                blocks.append(block)
                in_blocks.update(LINE_BREAK.split(block))
    for run in dict.fromkeys(blocks + found):
        decoded = None if run in in_blocks else _base64_text(run)
        if decoded is None:
            continue
        at = text.find(run)
        while at >= 0:
            yield Segment(at, at + len(run), decoded, None)
            at = text.find(run, at + len(run))


def _base64_text_in(run: str) -> re.Match[str] | None:
    """The base64 of text a run starts with; after a JSON escape (`\\nREVC...`), the run's `n` is
    the escape's, and no base64 of text starts with n, r or t."""
    return BASE64_TEXT.match(run) or (BASE64_TEXT.match(run, 1) if run[0] in "nrt" else None)


def _wrapped(matches: Iterable[re.Match[str] | None]) -> Iterator[str]:
    """Blocks of base64 lines of one width (the last may be shorter)."""
    for m in filter(None, matches):
        block = TRAILING_BREAK.sub("", m.group())
        lines = LINE_BREAK.split(block)
        if len({len(line) for line in lines[:-1]}) == 1 and len(lines[0]) % 4 == 0:
            yield block


def _base64_text(run: str) -> str | None:
    if len(run) > MAX_SEGMENT:
        return None
    body = LINE_BREAK.sub("", run).rstrip("=")
    body = body[: len(body) - len(body) % 4] if len(body) % 4 == 1 else body
    url_safe = "-" in body or "_" in body
    if url_safe and ("+" in body or "/" in body):
        return None
    try:
        data = base64.b64decode(body + "=" * (-len(body) % 4), altchars=b"-_" if url_safe else None, validate=True)
        decoded = data.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return decoded if len(decoded) >= MIN_DECODED and _readable(decoded) else None


def _readable(text: str) -> bool:
    return text.replace("\n", "").replace("\t", "").replace("\r", "").isprintable()


def _runs(
    text: str, hit: re.Pattern[str], run: re.Pattern[str], decode: Callable[[str, int, int], Segment | None]
) -> Iterator[Segment]:
    """Each `run` of text around a `hit` (an encoded character that stands for text), decoded; runs
    end at whitespace, quotes and backslashes that are not part of an escape."""
    end, backwards = 0, ""
    for m in hit.finditer(text):
        at = m.start()
        if at < end or not _stands_for_text(chr(int(m.group().lstrip("\\%ux"), 16))):
            continue
        backwards = backwards or text[::-1]  # reversed, the run before a hit is one forward match
        low, before = max(end, at - MAX_RUN_BEFORE), len(text) - at  # `before`: `at` in `backwards`
        start = at - (RUN_BEFORE.match(backwards, before, before + at - low).end() - before)
        end = max(m.end(), run.match(text, at).end())
        if MIN_DECODED <= end - start <= MAX_SEGMENT:  # each decoded character takes one or more
            segment = decode(text, start, end)
            if segment is not None:
                yield segment


def _percent_decode(text: str, start: int, end: int) -> Segment | None:
    chars, offsets, i = [], [], start
    for m in PERCENT.finditer(text, start, end):  # the text between two %XX is copied whole
        chars += [text[i : m.start()], chr(int(m.group()[1:], 16))]
        offsets += range(i, m.end() - 2)
        i = m.end()
    chars.append(text[i:end])
    offsets += range(i, end)
    return _segment(start, end, chars, offsets)


def _unescape(text: str, start: int, end: int) -> Segment | None:
    chars, offsets = [], []
    for m in ESCAPE_UNIT.finditer(text, start, end):
        offsets.append(m.start())
        unit = m.group()
        body = unit.lstrip("\\")
        if len(unit) == 1:
            chars.append(unit)
        elif not body:  # backslashes only: an escaped backslash, one character like every unit
            chars.append("\\")
        elif len(body) > 1:  # uXXXX, xXX
            chars.append(chr(int(body[1:], 16)))
        else:
            chars.append(SIMPLE_ESCAPES.get(body, body))
    return _segment(start, end, chars, offsets)


def _stands_for_text(c: str) -> bool:
    """An escape that a secret could be made of (`%21`, `\\u0041`), not a control byte (`%02d`)."""
    return c.isprintable() or c in "\n\t"


def _segment(start: int, end: int, chars: list[str], offsets: list[int]) -> Segment | None:
    decoded = "".join(chars)
    return Segment(start, end, decoded, (*offsets, end)) if len(decoded) >= MIN_DECODED else None
