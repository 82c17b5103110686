"""What `teachback run` says about itself, on stderr beside its other notices (stdout holds only the
transcript or the JSON lines): a header before the model loads, which can take half a minute, and a
closing line saying what was recorded and how to look at it."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from agent.config import Settings
from cli.options import configured_db


def say(line: str) -> None:
    print(f"teachback: {line}", file=sys.stderr, flush=True)


def header(settings: Settings, workspace: Path, record: bool) -> str:
    database = str(settings.db_path()) if record else "not recorded"
    return (
        f"{settings.model} · workspace {workspace.resolve()} · approval {settings.approval} · "
        f"database {database} · loading the model…"
    )


def closing(store, session_id: str) -> str:
    """`recorded N feedback pairs (M corrected) → ` and the commands that show them (with --db when
    `stats` run here would read another database)."""
    pairs = store.pairs(session_id=session_id)
    corrected = sum(1 for pair in pairs if pair.correction is not None)
    noun = "feedback pair" if len(pairs) == 1 else "feedback pairs"
    db = "" if str(store.path) == configured_db() else f" --db {shlex.quote(str(store.path))}"
    return (
        f"recorded {len(pairs)} {noun} ({corrected} corrected) in session {session_id} → "
        f"teachback stats{db} · teachback export{db} --format sdpo --out pairs.jsonl"
    )
