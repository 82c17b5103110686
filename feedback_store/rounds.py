"""The learning rounds of `teachback learn`, in the store's `learning_rounds` table.

A round is one pass of the loop: the data it trained on (hash, record count, since when), its
evaluation, and whether its adapter was promoted and why not. A rollback is a row too, so the
history says what was served when. Which adapter is served follows from the rows alone: promoted
rounds stack up, each rollback takes the top one off.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from feedback_store.store import Store

LEARN, ROLLBACK = "learn", "rollback"
_COLUMNS = (
    "id",
    "action",
    "adapter_id",
    "adapter_dir",
    "parent",
    "base",
    "data_hash",
    "records",
    "since",
    "metrics",
    "promoted",
    "reason",
    "started_at",
    "finished_at",
)


@dataclass(frozen=True)
class Round:
    action: str  # learn | rollback
    adapter_id: str | None  # the adapter trained (learn) or returned to (rollback); None: the base model
    parent: str | None  # the adapter served when the round began
    id: str = field(default_factory=lambda: f"round-{uuid.uuid4().hex[:12]}")
    adapter_dir: str | None = None
    base: str | None = None  # the base model file the adapter was trained for
    data_hash: str | None = None
    records: int = 0
    since: float | None = None  # training pairs recorded after this time (None: all)
    metrics: dict[str, Any] = field(default_factory=dict)
    promoted: bool = False
    reason: str = ""
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None


def record_round(store: Store, entry: Round) -> None:
    """Insert or replace the row for `entry` (a round is written when it starts and when it ends)."""
    row = asdict(entry)
    row["metrics"] = json.dumps(entry.metrics, sort_keys=True)
    row["promoted"] = int(entry.promoted)
    with store.write() as conn:
        conn.execute(
            f"INSERT OR REPLACE INTO learning_rounds ({', '.join(_COLUMNS)}) "
            f"VALUES ({', '.join('?' for _ in _COLUMNS)})",
            tuple(row[name] for name in _COLUMNS),
        )


def rounds(store: Store) -> list[Round]:
    """Every round and rollback, oldest first."""
    rows = store.query(f"SELECT {', '.join(_COLUMNS)} FROM learning_rounds ORDER BY started_at, rowid")
    return [_round(row) for row in rows]


def _round(row: dict[str, Any]) -> Round:
    values = dict(row)
    values["metrics"] = json.loads(values["metrics"] or "{}")
    values["promoted"] = bool(values["promoted"])
    return Round(**values)


def served_stack(history: list[Round]) -> list[Round]:
    """The promotions in effect, oldest first: the last one is the adapter served now (an empty
    stack: the base model)."""
    stack: list[Round] = []
    for entry in history:
        if not entry.promoted or entry.finished_at is None:
            continue
        if entry.action == LEARN:
            stack.append(entry)
        elif entry.action == ROLLBACK and stack:
            stack.pop()
    return stack


def served(store: Store) -> Round | None:
    """The round whose adapter is served now; None when it is the base model."""
    stack = served_stack(rounds(store))
    return stack[-1] if stack else None


def last_learned(store: Store, *, promoted_only: bool = False) -> Round | None:
    """The latest finished learn round (or the latest promoted one)."""
    done = [
        r
        for r in rounds(store)
        if r.action == LEARN and r.finished_at is not None and (r.promoted or not promoted_only)
    ]
    return done[-1] if done else None
