"""Secret redaction for exports: provider key formats and credentials by their place (headers,
URLs, command lines) and by their name (gitleaks-style rules in secret_rules.toml), plus the exact
values of credential-looking environment variables. Each hit becomes `[REDACTED:<kind>]`.

The rules match a secret wherever it stands, so it is found in a line-numbered `read_file`
result, a diff line, JSON-escaped tool arguments, YAML, a name/value list, a shell line or prose
alike; under a name that says "password", a password a person made up counts too. Encoded copies
(base64, percent-encoding, `\\u` escapes) are decoded and read with the same rules, to a bounded
depth (decode), and a secret found in one is replaced in its encoded form. All rules look
at the original text; their hits are merged (an earlier rule names the kind) and replaced in one
pass. Speed comes from trying little: a rule only on a text that holds one of its keywords or
matches its prefilter, a decode pass only on a text its trigger matches (all found in one
hyperscan pass over an ASCII text, which leaves most texts at once), token rules and base64 only
on the text's long words, the name rules only where a credential word starts.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from common.jsontext import dumps_unicode as _dumps
from feedback_store.redaction import decode
from feedback_store.redaction.prefilter import MIN_TOKEN, NOTHING, Selection, Selector
from feedback_store.redaction.rules import CompiledRule, Rule, compile_rule, load_rules

CREDENTIAL_ENV_NAME = re.compile(r"(?i)api|key|token|secret|passw|pwd|credential|auth|private")
MIN_ENV_VALUE = 8
ANCHOR_PREFIX_REACH = 24
MAX_DECODE_DEPTH = 5  # as gitleaks: base64 inside percent-encoding inside base64...
MAX_DECODED_SHARE = 4  # all decoded text read for one text, as a multiple of its length


def credential_env_values(env: Mapping[str, str]) -> list[str]:
    """Values of environment variables whose names look like credentials (API keys, tokens...)."""
    values = set()
    for name, value in env.items():
        value = value.strip()
        if (
            CREDENTIAL_ENV_NAME.search(name)
            and len(value) >= MIN_ENV_VALUE
            and not value.startswith(("/", "~", "."))
            and value.lower() not in ("true", "false")
            and not value.isdigit()
        ):
            values.add(value)
    return sorted(values, key=lambda v: (-len(v), v))


Span = tuple[int, int, str]  # start, end, kind


class Redactor:
    """Replaces secrets in text; `counts` tallies what was replaced, by kind."""

    def __init__(self, rules: list[Rule] | None = None, env: Mapping[str, str] | None = None) -> None:
        self.rules = load_rules() if rules is None else rules
        self.counts: Counter[str] = Counter()
        compiled = [compile_rule(rule) for rule in self.rules]
        self._tokens = [c for c in compiled if c.rule.token]
        self._others = [c for c in compiled if not c.rule.token]
        values = credential_env_values(os.environ if env is None else env)
        # Environment values are also looked for as they appear inside JSON text (quotes escaped).
        forms = set(values) | {json.dumps(v, ensure_ascii=False)[1:-1] for v in values}
        forms = sorted(forms, key=lambda v: (-len(v), v))
        self._env = re.compile("|".join(map(re.escape, forms))) if forms else None
        self._selector = Selector(self._tokens, self._others, forms)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def redact(self, text: str) -> str:
        spans = self.find(text)
        if not spans:
            return text
        self.counts.update(kind for _, _, kind in spans)
        return _replace(text, spans)

    def find(self, text: str) -> list[Span]:
        """The secrets in `text`, in order, without overlaps; nothing is counted. Encoded segments
        (base64, percent-encoding, `\\u` escapes) are decoded and read too, to MAX_DECODE_DEPTH
        levels and MAX_DECODED_SHARE times the text's length in all; a secret found in one is
        replaced in its encoded form."""
        chosen = self._selector.select(text)
        if chosen is NOTHING:  # most texts: nothing more to do
            return []
        budget = [MAX_DECODED_SHARE * len(text) + MIN_TOKEN]  # decoded characters left, shared by all levels
        return self._find(text, chosen, MAX_DECODE_DEPTH, budget)

    def _find(self, text: str, chosen: Selection, depth: int, budget: list[int]) -> list[Span]:
        words = [w for w in text.split() if len(w) >= decode.MIN_BASE64] if chosen.tokens or chosen.base64 else []
        spans: list[Span] = []
        if self._env is not None and chosen.env:
            spans += [(m.start(), m.end(), "env_value") for m in self._env.finditer(text)]
        if chosen.tokens:
            spans += self._token_spans(chosen.tokens, text, words)
        anchors: dict[str, list[int]] = {}  # where each anchor word occurs, shared by the rules
        lowered = chosen.lowered if chosen.lowered is not None and len(chosen.lowered) == len(text) else None
        for compiled in chosen.others:
            if compiled.rule.anchors:
                lowered = _lowered(text) if lowered is None else lowered
                spans += self._anchored_spans(compiled, text, lowered, anchors)
            else:
                spans += [_span(m, compiled) for m in compiled.pattern.finditer(text) if compiled.accepts(m)]
        if depth > 0:
            spans += self._decoded_spans(text, chosen, words if chosen.base64 else [], depth, budget)
        return _merge(spans)

    def _decoded_spans(
        self, text: str, chosen: Selection, words: list[str], depth: int, budget: list[int]
    ) -> list[Span]:
        spans = []
        for segment in decode.segments(text, words, chosen.percent, chosen.escapes):
            budget[0] -= len(segment.decoded)
            if budget[0] < 0:
                break
            inner = self._selector.select(segment.decoded)
            if inner is NOTHING:
                continue
            for start, end, kind in self._find(segment.decoded, inner, depth - 1, budget):
                spans.append((*segment.span(start, end), kind))
        return spans

    def _token_spans(self, rules: list[CompiledRule], text: str, words: list[str]) -> list[Span]:
        """Token rules run over the long words only (most text is short words), and each secret
        found is then located wherever it occurs in the whole text."""
        long_words = {w for w in words if len(w) >= MIN_TOKEN}
        if not long_words:
            return []
        joined = "\n".join(sorted(long_words))
        found: dict[str, str] = {}
        for compiled in rules:
            for m in compiled.pattern.finditer(joined):
                if compiled.accepts(m):
                    found.setdefault(m.group(compiled.rule.secret or 0), compiled.rule.id)
        spans = []
        for secret, kind in found.items():
            at = text.find(secret)
            while at >= 0:
                spans.append((at, at + len(secret), kind))
                at = text.find(secret, at + len(secret))
        return spans

    def _anchored_spans(
        self, compiled: CompiledRule, text: str, lowered: str, anchors: dict[str, list[int]]
    ) -> list[Span]:
        starts = set()
        for word in compiled.rule.anchors:
            if word not in anchors:
                anchors[word] = _occurrences(lowered, word)
            starts.update(anchors[word])
            if compiled.anchor_prefix:
                for at in anchors[word]:
                    prefix = compiled.anchor_prefix.search(lowered, max(0, at - ANCHOR_PREFIX_REACH), at)
                    if prefix:
                        starts.add(prefix.start())
        spans = []
        for start in sorted(starts):
            m = compiled.pattern.match(text, start)
            if m is not None and compiled.accepts(m):
                spans.append(_span(m, compiled))
        return spans

    def redact_value(self, value: Any, serialized: str | None = None) -> Any:
        """Redact JSON-like data (dicts, lists, strings); `serialized` is its JSON text when the
        caller already has it. The rules read JSON text as well as plain text, so the whole value
        is redacted in one pass over its JSON, which also finds a credential split between a key
        and its value (`{"password": "..."}`). Should a replacement ever leave that JSON invalid,
        each string is redacted on its own instead."""
        if isinstance(value, str):
            return self.redact(value)
        if serialized is None:
            serialized = _dumps(value)
        spans = self.find(serialized)
        if not spans:
            return value
        try:
            redacted = json.loads(_replace(serialized, spans))
        except ValueError:
            return self._walk(value)
        self.counts.update(kind for _, _, kind in spans)
        return redacted

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        if isinstance(value, dict):
            return {k: self._walk(v) for k, v in value.items()}
        return value


def _occurrences(text: str, word: str) -> list[int]:
    """Where `word` starts in `text`, occurrences not overlapping (as `finditer` finds them)."""
    found, at = [], text.find(word)
    while at >= 0:
        found.append(at)
        at = text.find(word, at + len(word))
    return found


def _lowered(text: str) -> str:
    lowered = text.lower()
    if len(lowered) != len(text):  # a few characters lower-case to two; keep offsets true
        lowered = "".join(c if len(c.lower()) != 1 else c.lower() for c in text)
    return lowered


def _replace(text: str, spans: list[Span]) -> str:
    pieces, last = [], 0
    for start, end, kind in spans:
        pieces += [text[last:start], f"[REDACTED:{kind}]"]
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def _span(match: re.Match[str], compiled: CompiledRule) -> Span:
    start, end = match.span(compiled.rule.secret or 0)
    return start, end, compiled.rule.id


def _merge(spans: list[Span]) -> list[Span]:
    """Spans in text order with overlaps joined; of overlapping spans, the one found first (by
    the earlier rule) names the kind. `spans` is in rule order."""
    merged: list[list[Any]] = []  # start, end, kind, rank
    for rank, (start, end, kind) in sorted(enumerate(spans), key=lambda item: (item[1][0], item[0])):
        if merged and start < merged[-1][1]:
            last = merged[-1]
            last[1] = max(last[1], end)
            if rank < last[3]:
                last[2], last[3] = kind, rank
        else:
            merged.append([start, end, kind, rank])
    return [(start, end, kind) for start, end, kind, _ in merged]
