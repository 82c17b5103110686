"""What the model was given, stored once and read back for exports.

In the text and grammar tool modes the provider gets a rendered form of the conversation (tool
schemas in the system prompt, calls as text, tool results as user turns); the embedded model also
reports the token ids it was fed and sampled. Successive calls of a session share almost all of
that, so each rendered message is a blob and the prompt token ids are stored in fixed chunks of
TOKEN_CHUNK ids, each a blob: a session stores its long shared prefix once. The model_calls row and
the model_usage event row keep the lists of blob hashes instead of the values.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.protocol import ModelUsage
from feedback_store.content import event_blobs
from feedback_store.content.event_blobs import BLOB_REFS
from feedback_store.content.hashing import canonical_json, content_hash, row_json
from feedback_store.store import Store

TOKEN_CHUNK = 512

PutBlob = Callable[[sqlite3.Connection, str, str | None], str | None]


def columns_for(conn: sqlite3.Connection, event: ModelUsage, put_blob: PutBlob) -> dict[str, str | None]:
    """Write the event's rendered messages and token ids as blobs; return the model_calls columns."""
    rendered = prompt_ids = None
    if event.rendered_messages is not None:
        rendered = [put_blob(conn, "rendered_message", canonical_json(m)) for m in event.rendered_messages]
    if event.prompt_token_ids is not None:
        ids = event.prompt_token_ids
        prompt_ids = [
            put_blob(conn, "token_ids", json.dumps(ids[i : i + TOKEN_CHUNK])) for i in range(0, len(ids), TOKEN_CHUNK)
        ]
    return {
        "tool_mode": event.tool_mode,
        "rendered": None if rendered is None else json.dumps(rendered),
        "prompt_token_ids": None if prompt_ids is None else json.dumps(prompt_ids),
        "completion_token_ids": None if event.completion_token_ids is None else json.dumps(event.completion_token_ids),
    }


def slim_event(event: ModelUsage, columns: dict[str, str | None]) -> dict[str, Any]:
    """The event as the events table keeps it: the rendered prompt and its token ids as the
    hashes of their chunks (feedback_store.content.event_blobs expands them)."""
    data = event.to_dict()
    for name in ("rendered", "prompt_token_ids"):
        if columns[name] is not None:
            key = "rendered_messages" if name == "rendered" else name
            data[key] = {BLOB_REFS: json.loads(columns[name])}
    return data


class UsageRows:
    """A model call's rows, made before any is written: its events row (the rendered prompt as the
    hashes of its chunks, large values as blobs), the blobs that row and the model_calls row name, in
    the order they are written, and the model_calls columns of the render. `problem` is why they
    could not be made (a value with no JSON form, text SQLite cannot store); the events row is then
    the event whole and writing the rest fails with it."""

    def __init__(self, conn: sqlite3.Connection, event: ModelUsage) -> None:
        self.blobs: list[tuple[str, str, str]] = []  # (hash, kind, text)
        self.problem: Exception | None = None
        try:
            self.render = columns_for(conn, event, self._keep)
            self.json = row_json(event_blobs.slim(conn, slim_event(event, self.render), self._keep))
            self.json.encode("utf-8")  # a lone surrogate fails here as the row's insert would
        # Raised again by the recorder, inside the step that writes the rows, where it is noted.
        except Exception as exc:
            self.problem, self.json = exc, event.to_json()

    def _keep(self, conn: sqlite3.Connection, kind: str, text: str | None) -> str | None:
        """A blob's hash (as put_blob gives it), the blob kept to be written with the model_calls row."""
        if text is None:
            return None
        key = content_hash(text)
        self.blobs.append((key, kind, text))
        return key


@dataclass(frozen=True)
class Render:
    """One model call as the model saw it."""

    tool_mode: str | None
    messages: list[dict[str, Any]] | None
    prompt_token_ids: list[int] | None
    completion_token_ids: list[int] | None
    logprobs: list[dict[str, Any]] | None


class Renders:
    """Reads the renders of the assistant messages of a store's sessions (blobs cached by hash)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.session: str | None = None
        self.rows: dict[int, dict[str, Any]] = {}
        self.blobs: dict[str, Any] = {}

    def at(self, session_id: str, seq: int) -> Render | None:
        """The render of the model call that produced message `seq`; None when none was recorded."""
        if session_id != self.session:
            self.session, self.rows = session_id, self._rows(session_id)
        row = self.rows.get(seq)
        if row is None:
            return None
        prompt_ids = None
        if row["prompt_token_ids"] is not None:
            prompt_ids = [i for key in json.loads(row["prompt_token_ids"]) for i in self._blob(key)]
        return Render(
            tool_mode=row["tool_mode"],
            messages=None if row["rendered"] is None else [self._blob(k) for k in json.loads(row["rendered"])],
            prompt_token_ids=prompt_ids,
            completion_token_ids=_loads(row["completion_token_ids"]),
            logprobs=_loads(row["logprobs"]),
        )

    def _rows(self, session_id: str) -> dict[int, dict[str, Any]]:
        rows = self.store.query(
            """
            SELECT m.seq, c.tool_mode, c.rendered, c.prompt_token_ids, c.completion_token_ids, c.logprobs
            FROM model_calls c JOIN events e ON e.id = c.id
            JOIN messages m ON m.session_id = c.session_id AND m.event_id = e.cause_id
            WHERE c.session_id = ?
            """,
            (session_id,),
        )
        return {row["seq"]: row for row in rows}

    def _blob(self, key: str) -> Any:
        if key not in self.blobs:
            text = self.store.blob(key)
            self.blobs[key] = None if text is None else json.loads(text)
        return self.blobs[key]


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)
