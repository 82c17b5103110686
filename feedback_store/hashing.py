"""Content hashes that name their algorithm, so stored keys stay valid if the algorithm changes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

ALGORITHM = "sha256"


def _encoder(sort_keys: bool, separators: tuple[str, str]) -> Callable[[Any], str]:
    """`json.dumps(value, ensure_ascii=False, sort_keys=..., separators=...)`, built once.

    json.dumps builds a new encoder on every call given options, and JSONEncoder.encode a new C
    encoder on every call: for the small values the recorder writes per event that costs more than
    the encoding. The C encoder is built once here, without the circular-reference check (which
    keeps state between calls); recorded values are JSON data, which has no cycles."""
    encoder = json.JSONEncoder(ensure_ascii=False, sort_keys=sort_keys, separators=separators)
    if c_make_encoder is None:  # no C accelerator in this Python
        return encoder.encode
    item_separator, key_separator = separators
    chunks = c_make_encoder(
        None, encoder.default, encode_basestring, None, key_separator, item_separator, sort_keys, False, True
    )
    return lambda value: "".join(chunks(value, 0))


_ordered = _encoder(sort_keys=False, separators=(",", ":"))
_canonical = _encoder(sort_keys=True, separators=(",", ":"))
_row = _encoder(sort_keys=True, separators=(", ", ": "))
_message = _encoder(sort_keys=False, separators=(", ", ": "))


def content_hash(text: str) -> str:
    return f"{ALGORITHM}:{hashlib.sha256(text.encode('utf-8')).hexdigest()}"


def ordered_json(value: Any) -> str:
    """JSON with no spaces and the keys in their given order: a recorded value exactly as it was.
    Key order is part of what a model is shown (the order of a tool's parameters in its schema, in
    the rendered prompt and the grammar), so the recorded tool schemas keep it."""
    return _ordered(value)


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal data gives equal text (and equal hashes)."""
    return _canonical(value)


def row_json(value: Any) -> str:
    """JSON with sorted keys and json.dumps' spacing, as the events table keeps an event."""
    return _row(value)


def message_json(value: Any) -> str:
    """JSON with the keys in their given order and json.dumps' spacing, as the messages table keeps a message."""
    return _message(value)
