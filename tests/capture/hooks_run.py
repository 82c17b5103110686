"""Running teachback the way another agent's hooks do: install it with the real command, read the
command back from the settings file it wrote, and pipe the agent's payloads through a shell."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PAYLOADS = Path(__file__).parent / "payloads"
EXECUTABLE = Path(sys.executable).with_name("teachback")


def teachback(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    words = [str(EXECUTABLE)] if EXECUTABLE.is_file() else [sys.executable, "-P", "-m", "cli"]
    return subprocess.run([*words, *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


def installed_command(settings: Path, event: str) -> str:
    """The command the settings file runs for `event` that is teachback's."""
    groups = json.loads(settings.read_text(encoding="utf-8"))["hooks"][event]
    commands = [h["command"] for g in groups for h in g["hooks"] if " capture " in h.get("command", "")]
    assert len(commands) == 1, commands
    return commands[0]


def payloads(name: str, cwd: Path, transcript: Path) -> list[dict[str, Any]]:
    text = (PAYLOADS / name).read_text(encoding="utf-8")
    for key, value in (("{cwd}", str(cwd)), ("{transcript}", str(transcript))):
        text = text.replace(key, json.dumps(value)[1:-1])
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def run_hook(command: str, payload: dict[str, Any] | bytes, cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    """One hook call as the host makes it (through the shell, the payload on stdin); its wall time."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    started = time.monotonic()
    done = subprocess.run(command, shell=True, input=data, cwd=cwd, capture_output=True, timeout=60)
    return done, time.monotonic() - started


def wait_for(db: Path, sql: str, params: tuple = (), timeout: float = 240.0) -> list[tuple]:
    """Rows of `sql` once there are any (the background recording takes seconds on a busy machine)."""
    deadline = time.monotonic() + timeout
    while True:
        if db.is_file():
            conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=5)
            try:
                rows = conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError:  # not migrated yet
                rows = []
            finally:
                conn.close()
            if rows:
                return rows
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing for {sql!r} after {timeout} s")
        time.sleep(0.5)
