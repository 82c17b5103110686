"""`teachback tui` as a real process in a pseudo-terminal: --model, --approval and --db as `run` takes them."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from feedback_store import open_store
from tests.conftest import turn

ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[PX^_][^\x1b]*\x1b\\|.)")


class Terminal:
    """A process on a 120x30 pseudo-terminal, and the text it has drawn (escape sequences removed)."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.fd, child = pty.openpty()
        fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "30"}
        self.process = subprocess.Popen(argv, stdin=child, stdout=child, stderr=child, cwd=cwd, env=env)
        os.close(child)
        self.raw = b""

    def text(self) -> str:
        return ESCAPES.sub("", self.raw.decode("utf-8", "replace"))

    def wait_for(self, *words: str, timeout: float = 45) -> None:
        deadline = time.monotonic() + timeout
        while not all(word in self.text() for word in words):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise AssertionError(f"{words} not shown; the screen said:\n{self.text()[-3000:]}")
            if select.select([self.fd], [], [], 0.2)[0]:
                try:
                    self.raw += os.read(self.fd, 65536)
                except OSError:  # the process closed the terminal
                    break

    def type(self, keys: str) -> None:
        os.write(self.fd, keys.encode())

    def close(self) -> int:
        try:
            code = self.process.wait(timeout=30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
            os.close(self.fd)
        return code


@pytest.mark.timeout(120)
def test_tui_takes_model_approval_and_db(git_repo: Path, script, tmp_path: Path, teachback_home: Path) -> None:
    model = script(turn(content="Nothing to change here."), name="greeter.json")
    db = tmp_path / "elsewhere" / "chosen.db"
    db.parent.mkdir()
    argv = [sys.executable, "-m", "cli", "tui", "--model", model, "--approval", "read-only", "--db", str(db)]
    terminal = Terminal([*argv, str(git_repo)], cwd=Path(__file__).parents[2])
    try:
        terminal.wait_for("scripted/greeter.json", "approval read-only", "ready")
        terminal.type("look around\r")
        terminal.wait_for("Nothing to change here.", "answered")
        terminal.type("\x11")  # ctrl+q
    finally:
        code = terminal.close()
    assert code == 0, terminal.text()[-2000:]
    with open_store(db) as store:
        (session,) = store.list_sessions()
        started = next(e for e in store.events(session.id) if e["type"] == "session_started")
    assert session.model == model and session.frontend == "tui"
    assert started["config"]["approval"] == "read-only"
    assert not (teachback_home / "feedback.db").exists()  # recorded where --db says, not in the default store


def test_tui_refuses_an_unknown_approval_mode() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cli", "tui", "--approval", "sometimes"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
    )
    assert done.returncode == 2 and "invalid choice: 'sometimes'" in done.stderr
