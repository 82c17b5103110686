"""Exports name no folder of the user's disk. Where a recorded text holds a session's workspace
folder (a session imported from an agent whose tools take absolute paths, a command's output, a
traceback), the folder is written as PLACEHOLDER_ROOT, the same for every session and machine, so
`/home/alex/shop/app.py` becomes `/workspace/app.py` and the record still reads as a path.

The replacement works on text alone (every session's folder, whichever session the text came
from), so it composes with redaction and its per-text memo: `OncePerText(Unrooted(Redactor))`.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from common.jsontext import dumps_unicode as dumps
from feedback_store.redaction.redactor import Redactor
from feedback_store.store import Store

PLACEHOLDER_ROOT = "/workspace"
_ABSOLUTE = re.compile(r"^(/|[A-Za-z]:[\\/])")


def workspace_roots(stores: Iterable[Store]) -> list[str]:
    """The absolute workspace folders the stores' sessions were recorded in (as recorded, and as
    this machine resolves them), the file system's root left out."""
    roots: set[str] = set()
    for store in stores:
        for row in store.query("SELECT DISTINCT workspace FROM sessions WHERE workspace IS NOT NULL"):
            folder = str(row["workspace"]).rstrip("/\\")
            if _ABSOLUTE.match(folder) and len(folder) > 3:
                roots.update({folder, os.path.realpath(folder)})
    return sorted(roots)


def root_pattern(roots: Iterable[str]) -> re.Pattern[str] | None:
    """Any of the folders as a whole path component: itself, a path inside it, or it ending a
    sentence, but not the start of another name (`/home/a/shop` in `/home/a/shop-old`). Each is also
    matched as JSON writes it once or twice (a call's arguments are JSON inside a JSON record)."""
    forms: set[str] = set()
    for root in roots:
        once = json.dumps(root)[1:-1]
        forms.update({root, once, json.dumps(once)[1:-1], json.dumps(root, ensure_ascii=False)[1:-1]})
    if not forms:
        return None
    alternatives = "|".join(re.escape(form) for form in sorted(forms, key=len, reverse=True))
    return re.compile(rf"(?<![\w.-])(?:{alternatives})(?![\w-]|\.\w)")


class Unrooted:
    """A Redactor's interface that puts PLACEHOLDER_ROOT in place of the workspace folders, then
    hands the text to `inner` (the Redactor, or None when redaction is off)."""

    def __init__(self, inner: Redactor | None, pattern: re.Pattern[str]) -> None:
        self.inner = inner
        self.pattern = pattern

    @property
    def counts(self) -> Counter[str]:  # OncePerText tallies through these
        return self.inner.counts if self.inner is not None else Counter()

    @counts.setter
    def counts(self, value: Counter[str]) -> None:
        if self.inner is not None:
            self.inner.counts = value

    def redact(self, text: str) -> str:
        text = self.pattern.sub(PLACEHOLDER_ROOT, text)
        return text if self.inner is None else self.inner.redact(text)

    def redact_value(self, value: Any, serialized: str | None = None) -> Any:
        if isinstance(value, str):
            return self.redact(value)
        if self.pattern.search(dumps(value) if serialized is None else serialized):
            value, serialized = self._walk(value), None
        return value if self.inner is None else self.inner.redact_value(value, serialized)

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.pattern.sub(PLACEHOLDER_ROOT, value)
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        if isinstance(value, dict):
            return {self._walk(k) if isinstance(k, str) else k: self._walk(v) for k, v in value.items()}
        return value


def unrooted(redactor: Redactor | None, stores: Iterable[Store]) -> Redactor | Unrooted | None:
    """`redactor`, made to replace the stores' workspace folders too (None: nothing to change)."""
    pattern = root_pattern(workspace_roots(stores))
    return redactor if pattern is None else Unrooted(redactor, pattern)
