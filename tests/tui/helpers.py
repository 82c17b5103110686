"""Building the app for tests and waiting on it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot

from agent.config import Settings
from tui import create_app
from tui.app import TeachbackApp


def make_app(workspace: Path, model: str, db: Path, approval: str = "full-auto") -> TeachbackApp:
    return create_app(workspace, Settings(model=model, approval=approval), store_path=db)


async def wait_for(pilot: Pilot, condition: Callable[[], object], timeout: float = 20.0, what: str = "") -> None:
    """Let the app run until `condition()` holds; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        await pilot.pause(0.05)


async def session_ready(pilot: Pilot, app: TeachbackApp) -> None:
    await wait_for(pilot, lambda: app.main_screen.host and app.main_screen.host.session, 30, "the session")


async def send(pilot: Pilot, app: TeachbackApp, text: str) -> None:
    """Type an instruction into the instruction line and press Enter."""
    line = app.main_screen.query_one("#instruction")
    line.focus()
    line.value = text
    await pilot.press("enter")
    await asyncio.sleep(0)
