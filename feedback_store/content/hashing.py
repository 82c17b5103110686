"""Content hashes that name their algorithm, so stored keys stay valid if the algorithm changes,
and the JSON texts the store keeps, each encoder built once (common.jsontext)."""

from __future__ import annotations

import hashlib
from typing import Any

from common.jsontext import dumps_unicode, dumps_with

ALGORITHM = "sha256"
_ORDERED = dumps_with(ensure_ascii=False, separators=(",", ":"))
_CANONICAL = dumps_with(ensure_ascii=False, sort_keys=True, separators=(",", ":"))
_ROW = dumps_with(ensure_ascii=False, sort_keys=True)


def content_hash(text: str) -> str:
    return f"{ALGORITHM}:{hashlib.sha256(text.encode('utf-8')).hexdigest()}"


def ordered_json(value: Any) -> str:
    """JSON with no spaces and the keys in their given order: a recorded value exactly as it was.
    Key order is part of what a model is shown (the order of a tool's parameters in its schema, in
    the rendered prompt and the grammar), so the recorded tool schemas keep it."""
    return _ORDERED(value)


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal data gives equal text (and equal hashes)."""
    return _CANONICAL(value)


def row_json(value: Any) -> str:
    """JSON with sorted keys and json.dumps' spacing, as the events table keeps an event."""
    return _ROW(value)


def message_json(value: Any) -> str:
    """JSON with the keys in their given order and json.dumps' spacing, as the messages table keeps a message."""
    return dumps_unicode(value)
