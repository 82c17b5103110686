"""SVG snapshots at 80x24: the chat screen after a turn, the diff review, the feedback browser.

Everything shown is fixed: the model's script exists (no set-up warning), the events carry fixed ids
and times, the store is recorded from a fixed event log, and times are shown in UTC. Update with `pytest tests/tui --snapshot-update`.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from textual.pilot import Pilot

from agent.protocol import (
    AssistantDelta,
    AssistantMessage,
    ModelUsage,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)
from agent.workspace import FileChange
from tests.tui.fixture_events import APP_AFTER, APP_BEFORE, record_fixture
from tests.tui.helpers import make_app, session_ready, wait_for
from tui.screens.feedback import FeedbackScreen
from tui.screens.review import ReviewScreen
from tui.widgets.chat import ChatView

SIZE = (80, 24)
SID = "snapshot"


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def turn_events() -> list:
    reply = "I'll fix the **greeting** in `app.py`, then check `util.py`."
    return [
        TurnStarted(
            session_id=SID,
            id="t1",
            ts=0,
            turn=1,
            text="fix the greeting",
            message={"role": "user", "content": "fix the greeting"},
        ),
        *[AssistantDelta(session_id=SID, id=f"d{i}", ts=0, text=reply[i : i + 7]) for i in range(0, len(reply), 7)],
        AssistantMessage(session_id=SID, id="a1", ts=0, step=1, message={"role": "assistant", "content": reply}),
        ModelUsage(
            session_id=SID,
            id="u1",
            ts=0,
            model="scripted",
            step=1,
            prompt_tokens=1200,
            completion_tokens=80,
            cost_usd=0.0021,
            latency_ms=5,
        ),
        ToolCallStarted(
            session_id=SID, id="c1s", ts=0, call_id="c1", name="read_file", arguments='{"path": "app.py"}', step=1
        ),
        ToolCallFinished(
            session_id=SID,
            id="c1f",
            ts=0,
            call_id="c1",
            name="read_file",
            ok=True,
            result="1: def greet(name):\n2:     return 'Hello, ' + name",
            step=1,
            target="app.py",
        ),
        ToolCallStarted(
            session_id=SID,
            id="c2s",
            ts=0,
            call_id="c2",
            name="edit_file",
            arguments='{"path": "app.py", "old_text": "Hi"}',
            step=2,
        ),
        ToolCallFinished(
            session_id=SID,
            id="c2f",
            ts=0,
            call_id="c2",
            name="edit_file",
            ok=False,
            result="old_text not found in app.py. Closest line (2):\n    return 'Hello, ' + name",
            step=2,
            error_kind="no_match",
            target="app.py",
        ),
        TurnFinished(session_id=SID, id="f1", ts=0, turn=1, reason="finished", steps=2),
    ]


def test_main_screen_after_a_turn(snap_compare, git_repo: Path, script, tmp_path: Path) -> None:
    app = make_app(git_repo, script(), tmp_path / "feedback.db")

    async def play_turn(pilot: Pilot) -> None:
        await session_ready(pilot, app)
        main = app.main_screen
        main.query_one("#instruction").cursor_blink = False  # the cursor's blink phase depends on timing
        await main.query_one(ChatView).add_user("fix the greeting")
        for event in turn_events():
            main.host.relay(event)
        await wait_for(pilot, lambda: main.query(".notice"), what="the turn to show")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=SIZE, run_before=play_turn)


def test_diff_review(snap_compare, git_repo: Path, script, tmp_path: Path) -> None:
    app = make_app(git_repo, script(), tmp_path / "feedback.db")
    changes = [
        FileChange("app.py", "modify", APP_BEFORE, APP_AFTER),
        FileChange("notes.md", "create", None, "# Notes\n\nGreeting now uses an f-string.\n"),
        FileChange("old.txt", "delete", "obsolete\n", None),
    ]

    async def open_review(pilot: Pilot) -> None:
        await session_ready(pilot, app)
        await app.push_screen(ReviewScreen(app.main_screen.host.session, changes, "Greeting fixed."))
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=SIZE, run_before=open_review)


def test_feedback_browser(snap_compare, git_repo: Path, script, tmp_path: Path) -> None:
    db = record_fixture(tmp_path / "feedback.db")
    app = make_app(git_repo, script(), db)

    async def open_browser(pilot: Pilot) -> None:
        await pilot.press("ctrl+b")
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, FeedbackScreen) and app.screen.query("DataTable").first().row_count,
            what="the feedback browser",
        )
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=SIZE, run_before=open_browser)
