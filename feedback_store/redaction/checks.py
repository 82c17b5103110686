"""The tests a candidate secret must pass before it is redacted (the `checks` of secret_rules.toml):
whether a value looks generated, is a stand-in or a template reference, decodes to credentials,
or is a literal written for a password-named key rather than code that computes one.
"""

from __future__ import annotations

import base64
import binascii
import math
import operator
import re
from collections import Counter
from collections.abc import Callable


def shannon_entropy(text: str) -> float:
    shares = list(map(len(text).__rtruediv__, Counter(text).values()))  # each n / len(text), in C
    return -sum(map(operator.mul, shares, map(math.log2, shares)))


def _char_class(c: str) -> int:
    return 0 if c.islower() else 1 if c.isupper() else 2 if c.isdigit() else 3


ASCII_CLASS_RUN = re.compile(r"[a-z]+|[A-Z]+|[0-9]+|[^a-zA-Z0-9]+")  # _char_class's classes, in ASCII


def class_changes(text: str) -> int:
    """How often the character class (lower, upper, digit, other) changes from one to the next."""
    if text.isascii():  # one run of a class per change, counted in C
        return max(0, len(ASCII_CLASS_RUN.findall(text)) - 1)
    return sum(_char_class(a) != _char_class(b) for a, b in zip(text, text[1:]))


WORD_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
DIGIT_RUN = re.compile(r"\d+")
SEPARATORS = re.compile(r"[._\-]")
CONSONANTS = re.compile(r"[bcdfghjklmnpqrstvwxz]+")


def looks_like_words(value: str) -> bool:
    """A name made of words (`self.password`, `authResponse.accessToken`, `sha256_hexdigest`):
    parts of ordinary length with vowels in them, few digit runs, no long consonant runs. Random
    text has short parts (case flips, digits) or long unpronounceable runs."""
    parts = WORD_PART.findall(value)
    if not parts or len(DIGIT_RUN.findall(value)) > 2:
        return False
    letters = "".join(parts).lower()
    if any(len(p) > 14 for p in parts) or sum(len(p) <= 2 for p in parts) > max(1, len(parts) // 3):
        return False
    if len(letters) / len(parts) < 3.5:
        return False
    if any(len(run) >= 5 for run in CONSONANTS.findall(value.lower())):
        return False
    return sum(c in "aeiouy" for c in letters) / len(letters) >= 0.12


def looks_random(value: str) -> bool:
    """Whether a value looks generated (a key, a token, a password) rather than written (a word,
    a dotted name, a date, a URL): enough distinct characters, a character class (lower, upper,
    digit, other) that changes often, and no word structure."""
    if len(value) < 8 or "://" in value or value.isdigit():
        return False
    entropy = shannon_entropy(value)
    if entropy < min(3.0, 0.8 * math.log2(len(value))):
        return False
    if not (len(value) >= 16 and entropy >= 4.0):  # else varied enough, whatever its classes
        bare = SEPARATORS.sub("", value)  # snake_case and dotted names change class only at separators
        if class_changes(bare) / max(1, len(bare) - 1) < 0.15:
            return False
    return not looks_like_words(value)


PLACEHOLDER = re.compile(
    r"(?i)^(?:\$|\\\$|%\(|%\w+%$|[<{]|\*{3,}|x{4,}|\.{3})|example|changeme|change_me|placeholder|redacted|your[_\-]|dummy|"
    r"^(?:password|passwd|pass|secret|token|none|null|true|false|undefined)$"
)
CONTENT_HASH = re.compile(r"^(?:sha1|sha256|sha512|md5):[0-9a-f]{16,}$")


def not_placeholder(value: str) -> bool:
    """Not a template reference ($VAR, ${VAR}, {{ var }}, <token>, %(pw)s), a stand-in word, or a
    content hash (`sha256:...`, as teachback itself writes)."""
    return not PLACEHOLDER.search(value) and not CONTENT_HASH.match(value)


def _b64decode(value: str) -> bytes | None:
    try:
        return base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def basic_auth(value: str) -> bool:
    """Base64 of `user:password` (HTTP Basic credentials, a Docker config `auth`)."""
    decoded = _b64decode(value)
    if decoded is None:
        return False
    text = decoded.decode("utf-8", "replace")
    _, colon, password = text.partition(":")
    return bool(colon and password) and text.isprintable()


def base64_private_key(value: str) -> bool:
    decoded = _b64decode(value[: len(value) // 4 * 4][:120])
    return decoded is not None and b"PRIVATE KEY" in decoded


def unspelled(value: str) -> bool:
    """Lower-case letters and digits that spell no word: a digit, or five consonants in a row."""
    return any(c.isdigit() for c in value) or any(len(run) >= 5 for run in CONSONANTS.findall(value))


PLAIN_WORD = re.compile(r"[A-Za-z][a-z]*[.,:;!?)]*")


def not_a_word(value: str) -> bool:
    """Not one plain word of prose (`failed`, `Authentication.`)."""
    return not PLAIN_WORD.fullmatch(value)


# --- literals under password names ----------------------------------------------------------------
# A person's password has no shape to recognise, so under a name that says "password" any literal
# counts, except what stands in for one and what refers to one kept elsewhere.

MIN_PASSWORD = 6
STAND_IN = re.compile(
    r"(?i)^(?:x+|\*+|\.+|-+|_+|#+|\?+|0+|1234(?:5(?:6(?:78?)?)?)?|string|str|text|bytes|int|integer|bool|boolean|object|"
    r"array|number|required|optional|hidden|masked|sensitive|default|empty|unset|notset|not[_\-]set|nothing|none|null|nil|"
    r"undefined|todo|tbd|fixme|test|testing|sample|secret|secrets|password|passwd|passwords|passphrase|pwd|pass|"
    r"my[_\-]?password|replace[_\-]?me)$|(?:^|[_\-\s.])(?:here|replace|insert|enter|fill[_\-]?in|todo)(?:$|[_\-\s.])"
)
# A reference to a value kept elsewhere: a template, an environment variable, a secret store.
REFERENCE = re.compile(r"\$\{|\$\(|\{\{|\{%|<%|^%\w+%$|^(?:vault|arn|secretsmanager|ssm|op|env|keyvault):|^ENC\(")
ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")  # SMTP_PASSWORD: the name of where it is kept
PRINTF = re.compile(r"%[-+ 0#]?\d*(?:\.\d+)?[sdirxXfeEgGc](?![A-Za-z0-9])|\{[\w.\[\]]*(?:![rsa])?(?::[^{}]*)?\}")


def password_literal(value: str) -> bool:
    """A literal (quoted, or in a name/value list) assigned to a password-named key: a secret
    unless empty, short, padded with spaces (a piece of a string built in code), a stand-in (`changeme`, `<password>`, `***`, `your-password-here`), a
    reference (`${VAR}`, `{{ .Values.pw }}`, `%DB_PW%`, the name of an environment variable), or
    a format template (`%s`, `{}`), the name of a field (`new_password`); written with spaces, it must hold a digit or a symbol (prose
    such as "Password for the account" is not one)."""
    if value != value.strip():  # a piece of a string built in code: `' + name + '`
        return False
    if len(value) < MIN_PASSWORD or not not_placeholder(value):
        return False
    if STAND_IN.search(value) or REFERENCE.search(value) or PRINTF.search(value) or ENV_NAME.fullmatch(value):
        return False
    if PASSWORD_WORD.search(value) and _code_name(value):  # the name of a field: "new_password"
        return False
    if any(c.isspace() for c in value):
        return any(c.isdigit() or c in "!@#$%^&*+=~|_<>" for c in value)
    return True


PASSWORD_WORD = re.compile(r"(?i)pass|pwd|secret")
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
CODE_ROOTS = frozenset(
    "self this cls os sys process env environ settings config conf cfg args opts options kwargs request req params "
    "secrets credentials creds ctx context app user data form body props state values".split()
)
PATH_START = ("/", "~/", "./", "../")


def _code_name(value: str) -> bool:
    """A variable, attribute or constant (`password`, `self.pw`, `DEFAULT_PASSWORD`, `pw2`): a name
    in one of code's cases whose only digits, if any, are one at its end, and an attribute of
    something other than `self`, `os`, `config`... has none. `Summer2024`, `Falcon1234maple`,
    `paris_coffee_Tiger_4`, `purple.Tiger0` are not."""
    if not IDENTIFIER.fullmatch(value):
        return False
    if value.split(".", 1)[0].lower() in CODE_ROOTS:
        return True
    runs = DIGIT_RUN.findall(value)
    if runs and ("." in value or len(runs) > 1 or len(runs[0]) > 1 or not value.endswith(runs[0])):
        return False
    return not any(_mixed_snake(name) for name in value.split("."))


def _mixed_snake(name: str) -> bool:
    """Parts in more than one case (paris_Coffee, qaz_WSX), which no code style writes."""
    parts = [part for part in name.split("_") if not part.isdigit()]
    cases = {"lower" if part.islower() else "upper" if part.isupper() else "other" for part in parts if part}
    return len(cases) > 1


def password_bare(value: str) -> bool:
    """An unquoted value after a password-named key, which in a config file is the password and in
    code is an expression: a name (`password=password`, `password: str`, `self.password`), a call
    or a subscript (`get_pw()`, `form["pw"]`), a YAML tag or alias (`!Ref DbPassword`, `*pw`),
    `None`, a path. Only a value that no code would write counts: one with a symbol or digits
    inside it (`Falcon1234!maple`, `Summer2024`)."""
    if not password_literal(value) or value.startswith(PATH_START) or value[0] in "!*&@:-":
        return False
    return not any(c in value for c in "([{") and not _code_name(value)


def password_value(value: str) -> bool:
    """A value after a password-named key, with its opening quote if it has one."""
    quoted = value.lstrip("\\")
    if quoted[:1] in ("'", '"', "`"):
        return password_literal(quoted[1:])
    return password_bare(value)


CHECKS: dict[str, Callable[[str], bool]] = {
    "random": looks_random,
    "not_placeholder": not_placeholder,
    "basic_auth": basic_auth,
    "not_a_word": not_a_word,
    "base64_private_key": base64_private_key,
    "unspelled": unspelled,
    "password_literal": password_literal,
    "password_bare": password_bare,
    "password_value": password_value,
}
