"""Large texts are stored once, by hash: the events table keeps each event whole, but a long
string (a file's contents, a tool's output, the system prompt) or a large list or object (the tool
schemas, logprobs) is kept in the blobs table and the event row holds its hash. The same text in
the normalised tables (sessions' system prompt and tools, edits' before and after, rendered
prompts) is the same blob row. `expand` gives back exactly the event that was recorded.

Markers: {"$text": hash} for a string, {"$json": hash} for a list or object (its JSON, keys in their
recorded order), and
the rendered prompt's chunk list {"blobs": [hash, ...]} (feedback_store.content.renders). A value that
happens to look like a marker is stored wrapped as {"$lit": value}.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from feedback_store.content.hashing import ordered_json

LARGE = 512  # characters: shorter values stay inline
TEXT, JSON, LITERAL = "$text", "$json", "$lit"
BLOB_REFS = "blobs"  # a ModelUsage field kept as {"blobs": [hash, ...]} (feedback_store.content.renders)
CHUNKED = {"rendered_messages": "messages", "prompt_token_ids": "ids"}
MARKERS = {TEXT, JSON, LITERAL}
# The blob kind of a field, as the normalised tables name the same texts (the first writer names it).
KINDS = {"system_prompt": "system_prompt", "tools": "tools", "before": "file", "after": "file", "user_content": "file"}

PutBlob = Callable[[sqlite3.Connection, str, str | None], str | None]


def slim(conn: sqlite3.Connection, data: dict[str, Any], put_blob: PutBlob) -> dict[str, Any]:
    """The event's dict with its large values replaced by blob hashes (the blobs written)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, str):  # most values: ids, names, short texts (checked first, as it is cheap)
            out[key] = {TEXT: put_blob(conn, KINDS.get(key, "text"), value)} if len(value) >= LARGE else value
        elif not isinstance(value, (list, dict)):
            out[key] = value
        elif key in CHUNKED and _is_refs(value):
            out[key] = value  # already chunked into blobs by renders
        elif not _marker(value):
            text = ordered_json(value)
            large = len(text) >= LARGE
            if large:
                out[key] = {JSON: put_blob(conn, KINDS.get(key, "json"), text)}
            else:  # no string in it is large; only a dict that looks like a marker needs wrapping
                out[key] = _strings(conn, value, put_blob) if "$" in text else value
        else:
            out[key] = _strings(conn, value, put_blob, KINDS.get(key, "text"))
    return out


def _strings(conn: sqlite3.Connection, value: Any, put_blob: PutBlob, kind: str = "text") -> Any:
    if isinstance(value, str):
        return {TEXT: put_blob(conn, kind, value)} if len(value) >= LARGE else value
    if isinstance(value, list):
        return [_strings(conn, v, put_blob) for v in value]
    if isinstance(value, dict):
        if _marker(value):
            return {LITERAL: value}
        return {k: _strings(conn, v, put_blob) for k, v in value.items()}
    return value


def expand(data: dict[str, Any], blob: Callable[[str], str | None]) -> dict[str, Any]:
    """The event's dict as recorded, from its row (rows written before blobs were used pass through)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in CHUNKED and _is_refs(value):
            parts = [json.loads(_read(blob, h)) for h in value[BLOB_REFS]]
            out[key] = parts if key == "rendered_messages" else [i for part in parts for i in part]
        else:
            out[key] = _expand(value, blob)
    return out


def _expand(value: Any, blob: Callable[[str], str | None]) -> Any:
    if isinstance(value, list):
        return [_expand(v, blob) for v in value]
    if isinstance(value, dict):
        if len(value) == 1:
            ((marker, inner),) = value.items()
            if marker == TEXT:
                return _read(blob, inner)
            if marker == JSON:
                return json.loads(_read(blob, inner))
            if marker == LITERAL:
                return inner
        return {k: _expand(v, blob) for k, v in value.items()}
    return value


def _marker(value: dict[str, Any]) -> bool:
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in MARKERS


def _is_refs(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {BLOB_REFS} and isinstance(value[BLOB_REFS], list)


def _read(blob: Callable[[str], str | None], key: str) -> str:
    text = blob(key)
    if text is None:
        raise KeyError(f"blob {key} is missing from the feedback database")
    return text
