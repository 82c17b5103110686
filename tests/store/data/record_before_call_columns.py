"""Records tests/store/data/before_call_columns.db and the figures read from it (pairs, every export
format, stats) into before_call_columns.json, with the code of the commit it runs at. It was run
once, at the commit before the migration that gives tool calls their roles, exit code, finishing
event and hook verdict as columns; tests/store/test_call_columns_backfill.py migrates that database
with today's code and compares. Run: `python -m tests.store.data.record_before_call_columns`."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
DB = HERE / "before_call_columns.db"
FIGURES = HERE / "before_call_columns.json"


def scripted(folder: Path, name: str, turns: list[dict]) -> str:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(turns))
    return f"scripted/{path}"


async def real_sessions(db: Path, folder: Path) -> None:
    """Sessions of the agent itself on a git repository, with the scripted model: a hook that
    blocks a call, a command the shell cannot run, a failing test fixed by an edit, a wrong path,
    a refused command with the user's reason."""
    from tests.agent.hooks_helpers import hook_script, run_session, toml_hooks
    from tests.conftest import call, turn

    repo = folder / "repo"
    repo.mkdir()
    (repo / "util.py").write_text("def lib():\n    return 1\n")
    (repo / "app.py").write_text("def greet():\n    return 'Hi'\n")
    (repo / "test_app.py").write_text("from app import greet\n\ndef test_greet():\n    assert greet() == 'Hello'\n")
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    block = 'if "fetch" in event["tool_input"]["command"]:\n    print("no fetching", file=sys.stderr); sys.exit(2)\n'
    toml_hooks(
        Path(os.environ["TEACHBACK_HOME"]) / "teachback.toml",
        "PreToolUse",
        "run_command",
        hook_script(folder, "h", block),
    )
    test = f"{sys.executable} -c \"import app, sys; sys.exit(0 if app.greet() == 'Hello' else 1)\""
    turns = [
        turn(call("run_command", {"command": "sh fetch.sh"}, "c1")),
        turn(call("run_command", {"command": "cp util.py lib.py"}, "c2")),
        turn(call("run_command", {"command": "no-such-tool --version"}, "c3")),
        turn(call("run_command", {"command": "git --version"}, "c4")),
        turn(call("read_file", {"path": "apps.py"}, "c5")),
        turn(call("read_file", {"path": "app.py"}, "c6")),
        turn(call("edit_file", {"path": "app.py", "old_text": "'Hi'", "new_text": "'Hey'"}, "c7")),
        turn(call("run_command", {"command": test}, "c8")),
        turn(call("edit_file", {"path": "app.py", "old_text": "'Hey'", "new_text": "'Hello'"}, "c9")),
        turn(call("run_command", {"command": test}, "c10")),
        turn(call("edit_file", {"path": "nope.py", "old_text": "x", "new_text": "y"}, "c11")),
        turn(content="done"),
    ]
    await run_session(repo, scripted(folder, "work", turns), db=db)
    asks = [
        turn(call("run_command", {"command": "rm -rf build"}, "d1")),
        turn(call("run_command", {"command": "ls"}, "d2")),
        turn(content="ok"),
    ]
    await run_session(
        repo, scripted(folder, "asks", asks), db=db, approval="suggest", answers=[(False, "keep build"), (True, None)]
    )


def record(db: Path) -> None:
    from agent.protocol import SessionStarted
    from feedback_store import Recorder, open_store
    from tests.store.events import mixed_session
    from tests.store.test_export_golden import SECRET, fixed, reviewed_session

    sessions = [mixed_session(session_id="s-mixed-1"), mixed_session(session_id="s-mixed-2"), reviewed_session()]
    events = [e for s in sessions for e in s.events]
    system = f"You are a careful coding agent. Deploy with {SECRET}."
    events = [dataclasses.replace(e, system_prompt=system) if isinstance(e, SessionStarted) else e for e in events]
    with open_store(db) as store:
        Recorder(store).record_many(fixed(events))


def figures(db: Path, folder: Path) -> dict:
    from feedback_store import open_store
    from feedback_store.export.export import FORMATS, export
    from tests.store.test_export_golden import exported

    with open_store(db) as store:
        pairs = [dataclasses.asdict(p) for p in store.pairs()]
        stats = store.stats()
    outputs = {}
    for fmt in sorted(FORMATS):
        out = folder / (f"{fmt}.parquet" if FORMATS[fmt].parquet else f"{fmt}.jsonl")
        export([db], fmt, out, redact=False)
        outputs[fmt] = exported(out)
    return {"pairs": pairs, "stats": stats, "exports": outputs}


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="before-call-columns-"))
    os.environ["TEACHBACK_HOME"] = str(folder / "home")
    (folder / "home").mkdir()
    db = folder / "feedback.db"
    record(db)
    asyncio.run(real_sessions(db, folder))
    import sqlite3

    conn = sqlite3.connect(db)
    conn.execute("VACUUM")
    conn.close()
    shutil.copy(db, DB)
    FIGURES.write_text(json.dumps(figures(db, folder), indent=1, sort_keys=True, default=str) + "\n")


if __name__ == "__main__":
    main()
