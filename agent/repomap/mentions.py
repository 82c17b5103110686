"""Identifiers named in an instruction (and the files it names), to personalise the ranking towards them."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CODE_SHAPED = re.compile(r"_|\d|[a-z][A-Z]|^[A-Z0-9_]{2,}$")
_MIN_PLAIN_LENGTH = 3


@functools.cache
def stopwords() -> frozenset[str]:
    text = resources.files("agent.repomap").joinpath("stopwords.txt").read_text(encoding="utf-8")
    return frozenset(w for w in text.split() if not w.startswith("#") and w.isalpha())


def identifiers_in(text: str) -> list[str]:
    """Identifier-like words of `text`, in order of first appearance, without repeats.

    A word written as code (in backquotes, next to `.`, `(` or `::`, or shaped like an
    identifier: snake_case, camelCase, CONSTANT, with digits) is always kept; a plain word is kept
    when it has three letters or more and is not a common English word.
    """
    found: dict[str, None] = {}
    for match in _WORD.finditer(text):
        word = match.group()
        if _written_as_code(text, match.start(), match.end(), word) or (
            len(word) >= _MIN_PLAIN_LENGTH and word.lower() not in stopwords()
        ):
            found.setdefault(word, None)
    return list(found)


def _written_as_code(text: str, start: int, end: int, word: str) -> bool:
    before = text[start - 1] if start else ""
    after = text[end] if end < len(text) else ""
    return bool(
        "`" in (before, after)
        or after == "("
        or (before == "." and start >= 2 and _is_word_char(text[start - 2]))
        or (after == "." and end + 1 < len(text) and _is_word_char(text[end + 1]))
        or text[max(0, start - 2) : start] == "::"
        or text[end : end + 2] == "::"
        or _CODE_SHAPED.search(word)
    )


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char in "_)]"


def split_focus(root: Path, focus: Sequence[str]) -> tuple[list[str], list[str]]:
    """(paths relative to `root`, identifiers) from focus words: an existing file or folder under
    `root` (relative or absolute) is a path; anything else is searched for identifiers
    (`Store.add` -> Store, add)."""
    paths: list[str] = []
    mentioned: list[str] = []
    base = root.resolve()
    for item in focus:
        candidate = (root / item).resolve()
        if candidate.exists() and candidate.is_relative_to(base):
            paths.append(candidate.relative_to(base).as_posix())
        else:
            mentioned += [w for w in identifiers_in(item) if w not in mentioned]
    return paths, mentioned
