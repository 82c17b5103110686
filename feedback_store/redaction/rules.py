"""The redaction rules: secret_rules.toml read into `Rule`s, the pieces its regexes share
expanded, and each rule compiled with the checks it names (`CompiledRule`), the one form the
engine (redactor) and the rule selection (prefilter) both read."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

from feedback_store.redaction.checks import CHECKS

# A token starts where no letter or digit precedes it, or right after a JSON-escaped `\n`/`\t`.
TOKEN_START = r"(?:(?<![A-Za-z0-9])|(?<=\\[nrt]))"
# After a credential's name in a name/value list (`- name: DD_API_KEY` / `  value: ...`,
# `{"name": "X_TOKEN", "value": ...}`, `ParameterKey`/`ParameterValue`, `"X_TOKEN": {"value": ...}`):
# the end of the name, a comma, a line break (with a read_file line number or a diff marker) or an
# opening brace, then a `value` key.
LINE_BREAK = r"(?:\r?\n|(?:\\r)?\\n)(?:[ \t]*\d+[|:\t])?[+\-]?"
VALUE_KEY = (
    rf"(?:,|:[ \t]*\{{)[ \t]*(?:{LINE_BREAK})?[ \t]*\\?[\"']?(?i:(?:parameter)?value)\\?[\"']?[ \t]*[:=]"
    rf"|{LINE_BREAK}[ \t]*(?i:value)[ \t]*:"
)
# A name that says it holds a password: the word whole or at the end of the name (db_password,
# dbPassword, PGPASSWORD, client_secret, DB_PASS_2), not inside another word (bypass, passes).
PASSWORD_KEY = (
    r"(?P<key>(?:(?<![A-Za-z])|(?<=\\[nrt])|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=PASS|PWD|SECRET)|(?<=[a-z])(?=passw(?:or)?d|pwd))"
    r"(?i:passw(?:or)?d|passphrase|pass|pwd|pw|secret)(?:[_\-]?\d{1,2})?(?![A-Za-z0-9_]|[.\-][A-Za-z0-9]))"
)
# What follows such a name before its value: a closing quote or bracket, then a name/value list's
# `value` key, `=`, `:=`, `=>`, `?=` (not `==`, `=~`), or `:` before a space or a quote (not an
# ARN's `:secret:name`, a URL's `://`).
ASSIGN = (
    rf"\\?[\"'`]?\]?[ \t]*(?:{VALUE_KEY}"
    r"|:=|=>|\?=|=(?![=~])|:(?=[ \t]|\\?[\"'`]))"
)
RULE_PIECES = {"{START}": TOKEN_START, "{VALUE_KEY}": VALUE_KEY, "{PASSWORD_KEY}": PASSWORD_KEY, "{ASSIGN}": ASSIGN}


@dataclass(frozen=True)
class Rule:
    id: str
    regex: str
    keywords: tuple[str, ...] = ()
    secret: str | None = None
    checks: tuple[str, ...] = ()
    checked: str | None = None  # the group the checks read, when not the secret
    ignore_key: str | None = None
    token: bool = False
    anchors: tuple[str, ...] = ()
    anchor_prefix: str | None = None
    prefilter: str | None = None  # instead of keywords: a regex every text the rule matches matches


def load_rules() -> list[Rule]:
    text = resources.files("feedback_store.redaction").joinpath("secret_rules.toml").read_text(encoding="utf-8")
    return [
        Rule(
            **{
                **rule,
                "regex": _expand(rule["regex"]),
                **({"prefilter": _expand(rule["prefilter"])} if "prefilter" in rule else {}),
                **{k: tuple(rule.get(k, ())) for k in ("keywords", "checks", "anchors")},
            }
        )
        for rule in tomllib.loads(text)["rules"]
    ]


def _expand(regex: str) -> str:
    for piece, pattern in RULE_PIECES.items():
        regex = regex.replace(piece, pattern)
    return regex


@dataclass(frozen=True)
class CompiledRule:
    rule: Rule
    pattern: re.Pattern[str]
    checks: tuple[Callable[[str], bool], ...]
    ignore_key: re.Pattern[str] | None
    anchor_prefix: re.Pattern[str] | None

    def accepts(self, match: re.Match[str]) -> bool:
        if self.ignore_key is not None and self.ignore_key.search(match.group("key")):  # cheaper than checks
            return False
        secret = match.group(self.rule.checked or self.rule.secret or 0)
        return all(check(secret) for check in self.checks)


def compile_rule(rule: Rule) -> CompiledRule:
    prefix = re.compile(f"(?:{rule.anchor_prefix})$") if rule.anchor_prefix else None
    return CompiledRule(
        rule,
        re.compile(rule.regex),
        tuple(CHECKS[name] for name in rule.checks),
        re.compile(rule.ignore_key) if rule.ignore_key else None,
        prefix,
    )
