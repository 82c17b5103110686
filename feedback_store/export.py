"""`teachback export`: pairs from one or more databases -> training files in one format.

Pairs are deduplicated across databases by content hash, filtered, redacted (by default), split
train/test by session (so no conversation lands on both sides) and written in a deterministic order.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from feedback_store.errors import StoreError
from feedback_store.formats import FORMATS
from feedback_store.hashing import canonical_json
from feedback_store.redact import Redactor
from feedback_store.rows import Pair
from feedback_store.store import Store, open_store

Progress = Callable[[int, int], None]
PROGRESS_EVERY = 1000

__all__ = ["FORMATS", "ExportResult", "export", "split_of"]


@dataclass(frozen=True)
class ExportResult:
    records: int  # records written (all splits)
    redactions: int  # secrets replaced
    paths: list[Path]
    redacted_kinds: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0  # pairs skipped because another database held the same content
    splits: dict[str, int] = field(default_factory=dict)  # records per split


def split_of(session_id: str, test_fraction: float) -> str:
    """'test' or 'train', decided by the session id's hash: stable across runs and machines."""
    if test_fraction <= 0:
        return "train"
    bucket = int.from_bytes(hashlib.sha256(session_id.encode()).digest()[:8], "big") / 2**64
    return "test" if bucket < test_fraction else "train"


def export(
    db_paths: Sequence[str | Path],
    fmt: str,
    out_path: str | Path,
    *,
    progress: Progress | None = None,
    redact: bool = True,
    include_flagged: bool = False,
    source: str | None = None,
    since: float | str | None = None,
    model: str | None = None,
    test_fraction: float = 0.0,
) -> ExportResult:
    if fmt not in FORMATS:
        raise StoreError(f"Unknown export format {fmt!r}. Choose one of: {', '.join(FORMATS)}.")
    if not 0 <= test_fraction < 1:
        raise StoreError(f"--test-fraction must be at least 0 and below 1, got {test_fraction}.")
    if not db_paths:
        raise StoreError("No database to export from: pass --db PATH (one or more).")
    form = FORMATS[fmt]
    if form.parquet:
        _require_pyarrow(fmt)
    for path in db_paths:
        if not Path(path).expanduser().is_file():
            raise StoreError(f"No feedback database at {path}. Check the path (the default is "
                             "$TEACHBACK_HOME/feedback.db).")
    out = Path(out_path).expanduser()
    names = {"train": out} if test_fraction <= 0 else {
        "train": out.with_name(f"{out.stem}.train{out.suffix}"),
        "test": out.with_name(f"{out.stem}.test{out.suffix}"),
    }
    filters = dict(source=source, since=since, model=model, include_flagged=include_flagged)
    redactor = Redactor() if redact else None
    messages = _SessionMessages(redactor)
    splits: Counter[str] = Counter({name: 0 for name in names})
    parquet_rows: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    done = duplicates = 0
    with ExitStack() as stack:
        stores = [stack.enter_context(open_store(path)) for path in db_paths]
        total = sum(store.count_pairs(**filters) for store in stores)
        writers = {} if form.parquet else {
            name: stack.enter_context(_AtomicWriter(path)) for name, path in names.items()
        }
        seen: set[str] = set()
        for pair in _merged(stores, filters):
            key = messages.key(pair)
            done += 1
            if progress is not None and (done % PROGRESS_EVERY == 0 or done == total):
                progress(done, total)
            if key in seen:
                duplicates += 1
                continue
            seen.add(key)
            record = form.build(messages.scrub(pair))
            if record is None:
                continue
            split = split_of(pair.session_id, test_fraction)
            splits[split] += 1
            if form.parquet:
                record["extra_info"]["split"] = split
                parquet_rows[split].append(record)
            else:
                writers[split].write(json.dumps(record, ensure_ascii=False) + "\n")
    if form.parquet:
        for name, path in names.items():
            _write_parquet(parquet_rows[name], path)
    return ExportResult(
        records=sum(splits.values()),
        redactions=redactor.total if redactor else 0,
        paths=list(names.values()),
        redacted_kinds=dict(redactor.counts) if redactor else {},
        duplicates=duplicates,
        splits=dict(splits),
    )


def _require_pyarrow(fmt: str) -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise StoreError(
            f"The {fmt} format writes parquet, which needs pyarrow: pip install 'teachback[parquet]'."
        ) from None


def _merged(stores: list[Store], filters: dict[str, Any]) -> Iterator[Pair]:
    """All stores' pairs in one order that does not depend on the order the databases were given."""
    return heapq.merge(
        *(store.iter_pairs(**filters) for store in stores),
        key=lambda p: (p.session_id, len(p.prompt), p.source, p.id),
    )


class _SessionMessages:
    """Work on a session's messages done once per message, however many pairs share it: its
    canonical JSON, the chained hash of the prompt up to it (for content keys), its redacted copy."""

    def __init__(self, redactor: Redactor | None) -> None:
        self.redactor = redactor
        self.session: str | None = None
        # id(message) -> [message, canonical JSON, prefix hash through it, redacted copy or None]
        self.memo: dict[int, list[Any]] = {}

    def _entry(self, message: dict[str, Any]) -> list[Any]:
        entry = self.memo.get(id(message))
        if entry is None:
            entry = [message, canonical_json(message), None, None]
            self.memo[id(message)] = entry
        return entry

    def key(self, pair: Pair) -> str:
        """The pair's content hash; the prompt part is chained message by message."""
        if pair.session_id != self.session:
            self.session, self.memo = pair.session_id, {}
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
            prompt=[self._redacted(m) for m in pair.prompt],
            completion=self._redacted(pair.completion),
            correction=None if pair.correction is None else self._redacted(pair.correction),
            feedback=self.redactor.redact(pair.feedback),
        )


def _write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    with _AtomicWriter(path) as handle:
        pq.write_table(pa.Table.from_pylist(rows), handle.name)


class _AtomicWriter:
    """A text file that appears at `path` only when complete (written beside it, then renamed)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> Any:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, self.name = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=self.path.parent)
        except OSError as exc:
            raise StoreError(f"Cannot write {self.path}: {exc.strerror}. Choose another --out path.") from exc
        self.handle = os.fdopen(fd, "w", encoding="utf-8")
        return self

    def write(self, text: str) -> None:
        self.handle.write(text)

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self.handle.close()
        if kind is None:
            os.replace(self.name, self.path)
        else:
            os.unlink(self.name)
