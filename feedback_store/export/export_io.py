"""The export's plumbing: output files, per-session message work (content keys, redaction),
near-duplicate keys, and the accepted edits the kto format adds."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent.protocol import LONE_SURROGATE
from feedback_store.content.hashing import canonical_json
from feedback_store.content.renders import Render
from feedback_store.errors import StoreError
from feedback_store.export.encoding import dumps, record_line
from feedback_store.export.views import Memo
from feedback_store.redaction.redactor import Redactor
from feedback_store.rows import Pair
from feedback_store.store import Store, parse_since

log = logging.getLogger(__name__)
_IDS = re.compile(r"\bcall_[0-9A-Za-z_]+|\b[0-9a-f]{16,}\b")


def near_key(pair: Pair) -> tuple[str, ...]:
    """Pairs with equal keys are near-duplicates: in one session, the same source, the same failed
    call(s) and the same feedback once call ids and whitespace are normalised."""
    calls = [
        (c["function"].get("name"), c["function"].get("arguments")) for c in pair.completion.get("tool_calls") or []
    ]
    said = canonical_json(calls) if calls else str(pair.completion.get("content") or "")
    return (pair.session_id, pair.source, _normal(said), _normal(pair.feedback))


def _normal(text: str) -> str:
    return " ".join(_IDS.sub("<id>", text).split())


def scrub_render(
    render: Render | None, pair: Pair, clean: Pair, redactor: Redactor | OncePerText | None
) -> Render | None:
    """The render with secrets redacted. Token ids and logprob tokens would still spell a secret
    out, so when redaction changed the rendered text they are dropped."""
    if render is None or redactor is None:
        return render
    messages = None if render.messages is None else [redactor.redact_value(m) for m in render.messages]
    if messages == render.messages and clean.completion == pair.completion:
        return render
    return replace(render, messages=messages, prompt_token_ids=None, completion_token_ids=None, logprobs=None)


def redact_record(
    record: dict[str, Any], redactor: Redactor | OncePerText | None, memo: Memo, encoded: Memo | None = None
) -> dict[str, Any]:
    """Every text field of the whole record redacted. Most of it already was, message by message;
    this also covers what the record derived (a correction from file contents, hindsight, tool
    schemas). A dict in a top-level list (a message, a tool schema) is redacted on its own once per
    session, since the session's records share them; the rest of the record is redacted in one pass
    over its JSON. `encoded` keeps the JSON text of the dicts, which the rules read (and the
    record's line is spliced from, export.encoding)."""
    if redactor is None:
        return record
    encoded = Memo() if encoded is None else encoded

    def redacted(value: dict[str, Any]) -> dict[str, Any]:
        return redactor.redact_value(value, encoded.get(value, dumps))

    out: dict[str, Any] = {}
    rest: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            out[key] = memo.each(value, redacted, key)
        else:
            out[key] = rest[key] = value
    if rest:
        # the rest holds the record's own ids: a text met once, so not one for OncePerText to keep
        alone = redactor.redactor if isinstance(redactor, OncePerText) else redactor
        out.update(alone.redact_value(rest, record_line(rest, encoded)))
    return out


def accepted_edits(store: Store, filters: dict[str, Any]) -> list[Pair]:
    """Edits the user accepted, as pair-shaped records (error_kind "accepted", no correction)."""
    where, params = ["e.decision = 'accepted'", "e.message_seq IS NOT NULL"], []
    if filters.get("source") not in (None, "user"):
        return []
    if filters.get("model") is not None:
        where.append("s.model = ?")
        params.append(filters["model"])
    if filters.get("since") is not None:
        where.append("e.reviewed_at >= ?")
        params.append(parse_since(filters["since"]))
    if not filters.get("include_flagged"):
        where.append("NOT EXISTS (SELECT 1 FROM flags f WHERE f.session_id = e.session_id)")
    rows = store.query(
        f"""SELECT e.id, e.session_id, e.message_seq, e.path, e.reviewed_at, e.call_id, s.model, s.tools_hash
            FROM edits e JOIN sessions s ON s.id = e.session_id WHERE {" AND ".join(where)}
            ORDER BY e.session_id, e.message_seq, e.id""",
        params,
    )
    out, conversations = [], {}
    for row in rows:
        if row["session_id"] not in conversations:
            conversations[row["session_id"]] = store.conversation(row["session_id"])
        messages = conversations[row["session_id"]]
        if row["message_seq"] >= len(messages):
            continue
        tools = json.loads(store.blob(row["tools_hash"]) or "[]")
        out.append(
            Pair(
                id=f"{row['id']}-accepted",
                session_id=row["session_id"],
                source="user",
                tool=None,
                error_kind="accepted",
                target=row["path"],
                feedback="The user accepted this edit.",
                prompt=messages[: row["message_seq"]],
                completion=messages[row["message_seq"]],
                correction=None,
                tools=tools,
                model=row["model"],
                created_at=row["reviewed_at"] or 0.0,
                corrected_at=None,
                flagged=False,
            )
        )
    return out


class OncePerText:
    """A Redactor that redacts each distinct text once per export: the same text met again (a
    system prompt or tool schemas shared by sessions, a message shared by a session's pairs, a
    feedback that recurs) gets the first result, and its secrets are counted again, as if it had
    been redacted anew. A value is known by its JSON text, as given or as the Redactor would write
    it. Past MEMO_CHARS characters of remembered text it starts over, so memory stays bounded."""

    MEMO_CHARS = 32_000_000

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        # text -> (result, or None when the text had no secret; the kinds of secret it had)
        self.texts: dict[str, tuple[Any, tuple[str, ...]]] = {}
        self.values: dict[str, tuple[Any, tuple[str, ...]]] = {}
        self.chars = 0

    def redact(self, text: str) -> str:
        return self._once(self.texts, text, text, self.redactor.redact)

    def redact_value(self, value: Any, serialized: str | None = None) -> Any:
        if isinstance(value, str):
            return self.redact(value)
        key = dumps(value) if serialized is None else serialized
        return self._once(self.values, key, value, lambda v: self.redactor.redact_value(v, serialized=key))

    def _once(
        self, memo: dict[str, tuple[Any, tuple[str, ...]]], key: str, value: Any, redact: Callable[[Any], Any]
    ) -> Any:
        known = memo.get(key)
        if known is None:
            # what this text adds is tallied apart (cheaper than comparing the whole tally before
            # and after), then added to the tally in the order the redactor found it
            counts, self.redactor.counts = self.redactor.counts, Counter()
            try:
                result = redact(value)
            finally:
                found, self.redactor.counts = self.redactor.counts, counts
            counts.update(found)
            known = (None if result is value else result, tuple(found.elements()))
            self._remember(memo, key, known)
            return result
        result, kinds = known
        if kinds:
            self.redactor.counts.update(kinds)
        return value if result is None else result

    def _remember(self, memo: dict[str, tuple[Any, tuple[str, ...]]], key: str, known: tuple) -> None:
        self.chars += len(key)
        if self.chars > self.MEMO_CHARS:
            self.texts.clear()
            self.values.clear()
            self.chars = len(key)
        memo[key] = known


class SessionMessages:
    """Work on a session's messages done once per message, however many pairs share it: its
    canonical JSON, the chained hash of the prompt up to it (for content keys), its redacted copy."""

    def __init__(self, redactor: Redactor | OncePerText | None) -> None:
        self.redactor = redactor
        self.session: str | None = None
        # id(message) -> [message, canonical JSON, prefix hash through it, redacted copy or None]
        self.memo: dict[int, list[Any]] = {}
        self.prompts = Memo()  # the redacted prompts: each pair's extends the one before

    def _entry(self, message: dict[str, Any]) -> list[Any]:
        entry = self.memo.get(id(message))
        if entry is None:
            entry = [message, canonical_json(message), None, None]
            self.memo[id(message)] = entry
        return entry

    def key(self, pair: Pair) -> str:
        """The pair's content hash; the prompt part is chained message by message."""
        if pair.session_id != self.session:
            self.session, self.memo, self.prompts = pair.session_id, {}, Memo()
        prompt = pair.prompt
        start = len(prompt)
        while start > 0 and (self.memo.get(id(prompt[start - 1])) or [None, None, None])[2] is None:
            start -= 1
        prefix = self.memo[id(prompt[start - 1])][2] if start else b""
        for message in prompt[start:]:
            entry = self._entry(message)
            prefix = hashlib.sha256(prefix + entry[1].encode()).digest()
            entry[2] = prefix
        correction = "null" if pair.correction is None else self._entry(pair.correction)[1]
        body = "\n".join((pair.source, self._entry(pair.completion)[1], pair.feedback, correction))
        return hashlib.sha256(prefix + body.encode()).hexdigest()

    def _redacted(self, message: dict[str, Any]) -> dict[str, Any]:
        entry = self._entry(message)
        if entry[3] is None:
            assert self.redactor is not None
            entry[3] = self.redactor.redact_value(message, serialized=entry[1])
        return entry[3]

    def scrub(self, pair: Pair) -> Pair:
        if self.redactor is None:
            return pair
        return replace(
            pair,
            prompt=self.prompts.each(pair.prompt, self._redacted),
            completion=self._redacted(pair.completion),
            correction=None if pair.correction is None else self._redacted(pair.correction),
            feedback=self.redactor.redact(pair.feedback),
        )


class Sink:
    """One output file. JSON lines are written beside it as they come and renamed into place by
    `finish`; parquet rows are collected and written by `finish` (with verl's extra_info `index`
    and `tools_kwargs` filled in). A sink that was not finished, or got no record, leaves no file;
    one left by an error (its own, or a later step's of the same export: another split, the card)
    takes back the file it put in place, unless that replaced an older one, and the folders it made."""

    def __init__(self, path: Path, parquet: bool) -> None:
        self.path, self.parquet = path, parquet
        self.rows: list[dict[str, Any]] = []
        self.count = 0
        self.temp: str | None = None
        self.made: list[Path] = []  # folders this sink created for its file
        self.placed_new = False  # its file is in place where there was none

    def __len__(self) -> int:
        return self.count

    def __enter__(self) -> Sink:
        try:
            self.made = make_folders(self.path.parent)
            fd, self.temp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        except OSError as exc:
            remove_empty(self.made)
            raise cannot_write(self.path, exc) from exc
        self.handle = os.fdopen(fd, "w", encoding="utf-8")
        return self

    def add(self, record: dict[str, Any], memo: Memo | None = None) -> None:
        """Write one record; `memo` keeps the JSON text of the dicts it shares with other records."""
        self.count += 1
        line = dumps(record) if memo is None else record_line(record, memo)
        if not line.isascii() and LONE_SURROGATE.search(line):  # what the model sent: no dataset can hold it
            line = LONE_SURROGATE.sub("\ufffd", line)
            record = json.loads(line)
        if self.parquet:
            self.rows.append(record)
        else:
            self.handle.write(line + "\n")

    def finish(self) -> None:
        self.handle.close()
        if not self.count or self.temp is None:
            return
        try:
            if self.parquet:
                _write_parquet(_verl_rows(self.rows, self.path), self.temp)
            new = not os.path.lexists(self.path)
            os.replace(self.temp, self.path)
        except OSError as exc:  # pyarrow's errors writing a file are OSErrors too
            raise cannot_write(self.path, exc) from exc
        self.temp, self.placed_new = None, new

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.handle.close()
        if self.temp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.temp)
        if kind is not None:  # the export failed: what it wrote goes too
            if self.placed_new:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)
            remove_empty(self.made)


def cannot_write(path: Path, exc: OSError) -> StoreError:
    return StoreError(
        f"Cannot write {path}: {exc.strerror or exc}. Nothing was written; choose an --out path in a folder "
        "you may write (check its permissions, and on Linux its immutable flag: lsattr, chattr -i)."
    )


def make_folders(folder: Path) -> list[Path]:
    """Create `folder` and the folders missing above it; return those created, outermost first."""
    missing = []
    while not os.path.lexists(folder) and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    made: list[Path] = []
    try:
        for each in reversed(missing):
            each.mkdir()
            made.append(each)
    except OSError:
        remove_empty(made)
        raise
    return made


def remove_empty(folders: list[Path]) -> None:
    """Remove the folders `make_folders` created, innermost first, where nothing else was put in them."""
    for folder in reversed(folders):
        try:
            folder.rmdir()
        except OSError:  # something else is in it now (or it is gone): it stays
            log.debug("kept the folder %s", folder)
            return


def _verl_rows(rows: list[dict[str, Any]], path: Path) -> list[dict[str, Any]]:
    """verl reads extra_info's `index` and `tools_kwargs` (create_kwargs for each tool by name);
    every row lists every tool of the file so the parquet column has one shape."""
    names = sorted({t["function"]["name"] for r in rows for t in json.loads(r["extra_info"]["tools"])})
    split = "test" if path.stem.endswith(".test") else "train"
    for index, row in enumerate(rows):
        row["extra_info"].update(index=index, split=split)
        if names:  # parquet cannot hold a struct without fields
            row["extra_info"]["tools_kwargs"] = {
                n: {"create_kwargs": {"pair_id": row["extra_info"]["id"]}} for n in names
            }
    return rows


def _write_parquet(rows: list[dict[str, Any]], path: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)
