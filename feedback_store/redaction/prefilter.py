"""Which rules and decode passes to try on a text (redactor): one hyperscan pass over an ASCII
text finds every rule's keywords or prefilter, every decode pass's trigger and every environment
value at once, so a text holding none of them is left at once; without hyperscan, or on a text
that is not ASCII, the keywords are looked for in the lower-cased text (all at once in its UTF-8,
with hyperscan; else each on its own).
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

from feedback_store.redaction import decode
from feedback_store.redaction.rules import CompiledRule

try:  # one pass over a text for every rule's keywords and prefilter; without it, one check each
    import hyperscan
except ImportError:  # pragma: no cover - a platform without its wheel
    hyperscan = None

MIN_TOKEN = 20  # the shortest match of a `token` rule


class Selection(NamedTuple):
    """What to look for in one text: the rules to try (in rule order), whether environment values
    may occur in it, and which decode passes may find something (base64, percent, escapes)."""

    tokens: list[CompiledRule]
    others: list[CompiledRule]
    env: bool
    base64: bool
    percent: bool
    escapes: bool
    lowered: str | None = None  # the text lower-cased, where choosing needed it


NOTHING = Selection([], [], False, False, False, False)
# What a hit of the one-pass database stands for, besides rules: a decode pass may find something,
# an environment value occurs.
BASE64, PERCENT, ESCAPES, ENV = "base64", "percent", "escapes", "env"


class Selector:
    """The rules to try on a text: those with neither keywords nor a prefilter, and those one of
    whose keywords the text holds (in any case) or whose prefilter matches it; the decode passes
    whose trigger (decode) matches it. On an ASCII text hyperscan finds every prefilter,
    keyword (of a rule without a prefilter) and trigger in one pass over its bytes (where their
    syntax means what it means to Python's re), and a text with none of them is left at once; on
    any other text, or without hyperscan, the keywords are looked for in the lower-cased text (by
    one hyperscan pass of literals over its UTF-8, or each alone), and the rules with a prefilter
    and no keywords and base64 are tried (they find their own places)."""

    def __init__(self, tokens: list[CompiledRule], others: list[CompiledRule], env_forms: list[str]) -> None:
        self.rules = tokens + others
        self.split = len(tokens)
        self.always = [i for i, c in enumerate(self.rules) if not c.rule.keywords and not c.rule.prefilter]
        by_keyword: dict[str, list[int]] = {}
        self.token_keywords: dict[str, list[int]] = {}  # the fallback looks for these in the long words only
        self.other_keywords: dict[str, list[int]] = {}
        for i, compiled in enumerate(self.rules):
            for keyword in compiled.rule.keywords:
                if not compiled.rule.prefilter:  # hyperscan reads the prefilter instead
                    by_keyword.setdefault(keyword, []).append(i)
                (self.token_keywords if i < self.split else self.other_keywords).setdefault(keyword, []).append(i)
        self.prefiltered = [i for i, c in enumerate(self.rules) if c.rule.prefilter]
        self.unindexed = [i for i in self.prefiltered if not self.rules[i].rule.keywords]  # tried without hyperscan
        self.env_keywords = tuple(sorted({v.lower() for v in env_forms}))
        # Each hit of the database, by its id: the rules it chooses, or the pass it calls for.
        self.targets: list[list[int] | str] = [*by_keyword.values(), *([i] for i in self.prefiltered)]
        self.targets += [BASE64, PERCENT, ESCAPES] + [ENV] * len(self.env_keywords)
        prefilters = tuple(self.rules[i].rule.prefilter for i in self.prefiltered)
        self._database, self._scratches = _database(tuple(by_keyword), prefilters, self.env_keywords)
        # On a text that is not ASCII, its lower-cased UTF-8 is searched for every keyword at once.
        self._keywords = tuple(sorted({*self.other_keywords, *self.token_keywords, *self.env_keywords}))
        self._keyword_database, self._keyword_scratches = _literals(self._keywords)

    def select(self, text: str) -> Selection:
        if self._database is None or not text.isascii():
            return self._select_each(text)
        hits: set[int] = set()
        # Arguments by position: hyperscan's keyword parsing costs about as much as a short scan.
        self._database.scan(text.encode("ascii"), _collect, 0, hits, _scratch(self._scratches, self._database))
        if not hits and not self.always:
            return NOTHING
        chosen, passes = set(self.always), set()
        for hit in hits:
            target = self.targets[hit]
            if isinstance(target, str):
                passes.add(target)
            else:
                chosen.update(target)
        order = sorted(chosen)
        return Selection(
            [self.rules[i] for i in order if i < self.split],
            [self.rules[i] for i in order if i >= self.split],
            ENV in passes,
            BASE64 in passes,
            PERCENT in passes,
            ESCAPES in passes,
        )

    def _select_each(self, text: str) -> Selection:
        chosen = set(self.always)
        lowered = text.lower()
        held = self._held(lowered, (*self.other_keywords, *self.env_keywords))
        for keyword in held.intersection(self.other_keywords):
            chosen.update(self.other_keywords[keyword])
        long_words = "\n".join({w for w in text.split() if len(w) >= MIN_TOKEN}).lower()
        for keyword in self._held(long_words, tuple(self.token_keywords)).intersection(self.token_keywords):
            chosen.update(self.token_keywords[keyword])
        chosen.update(self.unindexed)  # a prefilter alone in re costs more than its rule tried
        order = sorted(chosen)
        return Selection(
            [self.rules[i] for i in order if i < self.split],
            [self.rules[i] for i in order if i >= self.split],
            not held.isdisjoint(self.env_keywords),
            True,
            *decode.may_hold(text),
            lowered,
        )

    def _held(self, text: str, keywords: tuple[str, ...]) -> set[str]:
        """The keywords `text` holds, of `keywords` (hyperscan may name others too). In UTF-8 a
        character's bytes never start inside another's, so the bytes of a keyword occur in the
        text's exactly where the keyword does."""
        if self._keyword_database is None:
            return set(filter(text.__contains__, keywords))
        hits: set[int] = set()
        scratch = _scratch(self._keyword_scratches, self._keyword_database)
        self._keyword_database.scan(text.encode("utf-8", "surrogatepass"), _collect, 0, hits, scratch)
        return {self._keywords[i] for i in hits}


def _collect(pattern: int, start: int, end: int, flags: int, hits: set[int]) -> None:
    hits.add(pattern)


def _scratch(scratches: threading.local, database: Any) -> Any:
    """This thread's scratch space for `database`, made at its first scan (a scan needs one of its own)."""
    scratch = getattr(scratches, "scratch", None)
    if scratch is None:
        scratch = scratches.scratch = hyperscan.Scratch(database)
    return scratch


_DATABASES: dict[tuple, tuple[Any, threading.local]] = {}


def _database(
    keywords: tuple[str, ...], prefilters: tuple[str, ...], env_keywords: tuple[str, ...]
) -> tuple[Any, threading.local]:
    """One hyperscan database of the keywords (caseless literals), the prefilters, the decode
    passes' triggers (base64, percent, escapes) and the environment values (caseless literals),
    numbered in that order; built once per set and shared, with each thread's scratch space for
    it (a scan needs one of its own)."""
    if hyperscan is None:
        return None, threading.local()
    key = (keywords, prefilters, env_keywords)
    if key not in _DATABASES:
        literal = [_hs_literal(k) for k in keywords]
        triggers = (decode.BASE64_TRIGGER, decode.PERCENT_TRIGGER, decode.ESCAPE_TRIGGER)
        patterns = [p.encode("utf-8") for p in (*prefilters, *triggers)]
        expressions = literal + patterns + [_hs_literal(v) for v in env_keywords]
        flags = [hyperscan.HS_FLAG_SINGLEMATCH | hyperscan.HS_FLAG_CASELESS] * len(literal)
        flags += [hyperscan.HS_FLAG_SINGLEMATCH] * len(patterns)
        flags += [hyperscan.HS_FLAG_SINGLEMATCH | hyperscan.HS_FLAG_CASELESS] * len(env_keywords)
        database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        database.compile(
            expressions=expressions, ids=list(range(len(expressions))), elements=len(expressions), flags=flags
        )
        _DATABASES[key] = database, threading.local()
    return _DATABASES[key]


def _literals(words: tuple[str, ...]) -> tuple[Any, threading.local]:
    """A hyperscan database of `words` as literals (case matters), numbered in order, built once
    per set and shared, with each thread's scratch space for it."""
    if hyperscan is None or not words:
        return None, threading.local()
    key = ("literals", words)
    if key not in _DATABASES:
        database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        database.compile(
            expressions=[_hs_literal(word) for word in words],
            ids=list(range(len(words))),
            elements=len(words),
            flags=[hyperscan.HS_FLAG_SINGLEMATCH] * len(words),
        )
        _DATABASES[key] = database, threading.local()
    return _DATABASES[key]


def _hs_literal(text: str) -> bytes:
    """`text` as a hyperscan pattern that matches its UTF-8 bytes literally."""
    return b"".join(b"\\x%02x" % byte for byte in text.encode("utf-8", "surrogatepass"))
