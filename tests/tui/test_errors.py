"""User-level failures become notifications and stay in the chat; the app stays up. litellm stays off
the first paint (the start-up check of a litellm model imports it afterwards, off the event loop)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from textual.app import App

from tests.conftest import turn
from tests.tui.helpers import make_app, send, session_ready, wait_for
from tui.widgets.status_bar import StatusBar


def toasts(app: App) -> str:
    return "\n".join(str(toast.render()) for toast in app.screen.query("Toast"))


@pytest.mark.timeout(60)
async def test_an_unreachable_model_is_a_notification_not_a_crash(git_repo: Path, script, tmp_path: Path) -> None:
    model = script({"error": "auth"}, turn(content="Back again."))
    app = make_app(git_repo, model, tmp_path / "feedback.db")
    async with app.run_test(size=(100, 32), notifications=True) as pilot:
        await session_ready(pilot, app)
        main = app.main_screen
        await send(pilot, app, "hello?")
        await wait_for(pilot, lambda: "auth" in toasts(app).lower(), what="the error notification")
        await wait_for(pilot, lambda: not main.turn_running, what="the turn to end")
        assert app.is_running and main.query_one(StatusBar).state == "ready"
        assert "error" in str(main.query(".notice.error").last().render())
        app.clear_notifications()  # the toast fades; the chat keeps the error and what to do about it
        await pilot.pause()
        assert not toasts(app)
        kept = chat_errors(app)
        assert "scripted auth error" in kept and "Turn 1: error after 1 step" in kept


def chat_errors(app: App) -> str:
    return "\n".join(str(notice.render()) for notice in app.main_screen.query(".notice.error"))


@pytest.mark.timeout(90)
async def test_a_missing_key_is_a_warning_in_the_chat_before_the_first_turn(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    app = make_app(git_repo, "anthropic/claude-sonnet-4-5", tmp_path / "feedback.db")
    async with app.run_test(size=(100, 32), notifications=True) as pilot:
        await session_ready(pilot, app)
        await wait_for(pilot, lambda: "ANTHROPIC_API_KEY" in chat_errors(app), 60, "the set-up warning")
        assert "teachback doctor" in chat_errors(app)
        await wait_for(pilot, lambda: "ANTHROPIC_API_KEY" in toasts(app), what="the set-up notification")


@pytest.mark.timeout(60)
async def test_a_working_set_up_gives_no_warning(git_repo: Path, script, tmp_path: Path) -> None:
    app = make_app(git_repo, script(turn(content="Hello.")), tmp_path / "feedback.db")
    async with app.run_test(size=(100, 32), notifications=True) as pilot:
        await session_ready(pilot, app)
        await app.workers.wait_for_complete()  # the session's start and the set-up check
        assert not chat_errors(app) and not toasts(app)


@pytest.mark.timeout(60)
async def test_a_corrupt_database_is_reported_and_the_agent_still_runs(git_repo: Path, script, tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    db.write_bytes(b"this is not an SQLite database" * 100)
    app = make_app(git_repo, script(turn(content="Working without a record.")), db)
    async with app.run_test(size=(100, 32), notifications=True) as pilot:
        await wait_for(pilot, lambda: "Not recording feedback" in toasts(app), what="the store notification")
        await session_ready(pilot, app)
        await send(pilot, app, "go on")
        await wait_for(pilot, lambda: app.main_screen.query(".notice"), what="the turn")
        await pilot.press("ctrl+b")
        await wait_for(pilot, lambda: "unavailable" in toasts(app), what="the browser refusal")
        assert app.screen is app.main_screen


def test_first_paint_does_not_import_litellm(git_repo: Path, tmp_path: Path) -> None:
    code = f"""
import asyncio, sys
from pathlib import Path
from agent.config import Settings
from tui import create_app

async def main():
    app = create_app(Path({str(git_repo)!r}), Settings(model="openai/gpt-4o-mini"),
                     store_path=Path({str(tmp_path / "f.db")!r}))
    async with app.run_test() as pilot:
        first_paint = "litellm" in sys.modules
        await pilot.pause(0.5)
        assert app.main_screen.host.session is not None
    print(first_paint)

asyncio.run(main())
"""
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"


@pytest.mark.timeout(60)
async def test_a_missing_workspace_is_reported_and_the_browsers_still_work(tmp_path: Path) -> None:
    app = make_app(tmp_path / "no-such-dir", "scripted/unused.json", tmp_path / "feedback.db")
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await wait_for(pilot, lambda: "Could not start the agent" in toasts(app), what="the session error")
        assert app.main_screen.query_one(StatusBar).state == "no session"
        await send(pilot, app, "anything")
        await wait_for(pilot, lambda: "not ready" in toasts(app), what="the refusal to send")
        await pilot.press("ctrl+b")
        await wait_for(pilot, lambda: app.screen is not app.main_screen, what="the feedback browser")
