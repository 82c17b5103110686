"""Content hashes that name their algorithm, so stored keys stay valid if the algorithm changes."""

from __future__ import annotations

import hashlib
import json
from typing import Any

ALGORITHM = "sha256"

# Encoders built once: json.dumps builds a new encoder for every call given options, which costs
# more than encoding a small value. An encoder keeps no state between calls.
_ORDERED = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_CANONICAL = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))
_ROW = json.JSONEncoder(ensure_ascii=False, sort_keys=True)
_MESSAGE = json.JSONEncoder(ensure_ascii=False)


def content_hash(text: str) -> str:
    return f"{ALGORITHM}:{hashlib.sha256(text.encode('utf-8')).hexdigest()}"


def ordered_json(value: Any) -> str:
    """JSON with no spaces and the keys in their given order: a recorded value exactly as it was.
    Key order is part of what a model is shown (the order of a tool's parameters in its schema, in
    the rendered prompt and the grammar), so the recorded tool schemas keep it."""
    return _ORDERED.encode(value)


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal data gives equal text (and equal hashes)."""
    return _CANONICAL.encode(value)


def row_json(value: Any) -> str:
    """JSON with sorted keys and json.dumps' spacing, as the events table keeps an event."""
    return _ROW.encode(value)


def message_json(value: Any) -> str:
    """JSON with the keys in their given order and json.dumps' spacing, as the messages table keeps a message."""
    return _MESSAGE.encode(value)
