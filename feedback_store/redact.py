"""Secret redaction for exports: provider key patterns (gitleaks-style rules in secret_rules.toml),
a keyword + entropy rule for generic credentials, and the exact values of credential-looking
environment variables. One combined regular expression; each hit becomes `[REDACTED:<rule>]`."""

from __future__ import annotations

import json
import math
import os
import re
import tomllib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

CREDENTIAL_ENV_NAME = re.compile(r"(?i)api|key|token|secret|passw|pwd|credential|auth|private")
MIN_ENV_VALUE = 8


@dataclass(frozen=True)
class Rule:
    id: str
    regex: str
    keywords: tuple[str, ...] = ()
    secret: str | None = None
    entropy: float | None = None
    mixed: bool = False
    ignore_key: str | None = None


def load_rules() -> list[Rule]:
    text = resources.files("feedback_store").joinpath("secret_rules.toml").read_text(encoding="utf-8")
    return [Rule(**{**rule, "keywords": tuple(rule.get("keywords", ()))}) for rule in tomllib.loads(text)["rules"]]


def shannon_entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


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


class Redactor:
    """Replaces secrets in text; `counts` tallies what was replaced, by rule."""

    def __init__(self, rules: list[Rule] | None = None, env: Mapping[str, str] | None = None) -> None:
        self.rules = load_rules() if rules is None else rules
        self.counts: Counter[str] = Counter()
        parts = []
        values = credential_env_values(os.environ if env is None else env)
        if values:
            parts.append("(?P<r_env>" + "|".join(re.escape(v) for v in values) + ")")
        for index, rule in enumerate(self.rules):
            body = rule.regex
            for group in ("secret", "key"):
                body = body.replace(f"(?P<{group}>", f"(?P<{group}_{index}>")
            parts.append(f"(?P<r_{index}>{body})")
        self._pattern = re.compile("|".join(parts))
        self._ignore = {i: re.compile(r.ignore_key) for i, r in enumerate(self.rules) if r.ignore_key}
        # The combined expression is slow to run over text with no secret in it; a rule can only
        # match where one of its keywords occurs, so most text is passed over by substring tests.
        self._always = any(not rule.keywords for rule in self.rules)
        # Environment values are also looked for as they appear inside JSON text (quotes escaped).
        escaped = {json.dumps(v, ensure_ascii=False)[1:-1].lower() for v in values}
        self._keywords = sorted({k for rule in self.rules for k in rule.keywords} | {v.lower() for v in values} | escaped)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def might_hold_secrets(self, text: str) -> bool:
        if self._always:
            return True
        lowered = text.lower()
        for keyword in self._keywords:
            if keyword in lowered:
                return True
        return False

    def redact(self, text: str) -> str:
        if not self.might_hold_secrets(text):
            return text
        return self._pattern.sub(self._replace, text)

    def redact_value(self, value: Any, serialized: str | None = None) -> Any:
        """Redact every string inside JSON-like data (dicts, lists); `serialized` is its JSON text
        when the caller already has it."""
        if isinstance(value, str):
            return self.redact(value)
        if serialized is None:
            serialized = json.dumps(value, ensure_ascii=False)
        if not self.might_hold_secrets(serialized):
            return value  # one test over the whole message instead of one per string
        return self._walk(value)

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        if isinstance(value, dict):
            return {k: self._walk(v) for k, v in value.items()}
        return value

    def _replace(self, match: re.Match[str]) -> str:
        name = match.lastgroup
        if name == "r_env":
            self.counts["env_value"] += 1
            return "[REDACTED:env_value]"
        index = int(name[2:])  # type: ignore[index]
        rule = self.rules[index]
        whole = match.group(0)
        if rule.secret is None:
            self.counts[rule.id] += 1
            return f"[REDACTED:{rule.id}]"
        secret = match.group(f"{rule.secret}_{index}")
        start, end = match.span(f"{rule.secret}_{index}")
        offset = match.start()
        if self._accepts(index, rule, secret, match):
            self.counts[rule.id] += 1
            replacement = f"[REDACTED:{rule.id}]"
        else:  # not a generic secret, but a more specific rule may still match inside it
            replacement = self.redact(secret)
        return whole[: start - offset] + replacement + whole[end - offset :]

    def _accepts(self, index: int, rule: Rule, secret: str, match: re.Match[str]) -> bool:
        if rule.entropy is not None and shannon_entropy(secret) < rule.entropy:
            return False
        if rule.mixed and not (any(c.isdigit() for c in secret) and any(c.isalpha() for c in secret)):
            return False
        if "://" in secret:
            return False
        ignore = self._ignore.get(index)
        if ignore is not None and match.groupdict().get(f"key_{index}"):
            if ignore.search(match.group(f"key_{index}")):
                return False
        return True
