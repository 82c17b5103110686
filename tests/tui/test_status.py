"""The status line while a turn runs: how long it has run, and what it is waiting for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.protocol import AssistantDelta
from tests.conftest import call, turn
from tests.tui.helpers import make_app, send, session_ready, wait_for
from tui.app import TeachbackApp
from tui.screens.modals import ApprovalModal
from tui.widgets.status_bar import StatusBar

CLOCK = re.compile(r"^ running (\d+):(\d\d) ")


def status_line(app: TeachbackApp) -> str:
    return str(app.main_screen.query_one(StatusBar).render())


def clock(app: TeachbackApp) -> int:
    """The seconds the status line says the turn has run."""
    match = CLOCK.search(status_line(app))
    assert match, status_line(app)
    return int(match[1]) * 60 + int(match[2])


@pytest.mark.timeout(90)
async def test_the_clock_runs_and_the_phase_says_what_the_turn_waits_for(
    git_repo: Path, script, tmp_path: Path
) -> None:
    model = script(turn(content="First answer.") | {"delay": 3}, turn(content="Second answer.") | {"delay": 2})
    app = make_app(git_repo, model, tmp_path / "feedback.db")
    async with app.run_test(size=(120, 32)) as pilot:
        await session_ready(pilot, app)
        await app.workers.wait_for_complete()  # the start-up check
        assert status_line(app).startswith(" ready ") and not CLOCK.search(status_line(app))

        await send(pilot, app, "first")
        await wait_for(pilot, lambda: "loading the model, reading the prompt" in status_line(app), what="the phase")
        started = clock(app)
        await wait_for(pilot, lambda: clock(app) >= started + 2, 10, "the clock to tick")
        # text streamed while the model writes (what a streaming model's deltas are)
        app.main_screen.host.relay(AssistantDelta(session_id=app.main_screen.host.session.id, text="Fi" * 20))
        await wait_for(pilot, lambda: "generating (40 chars)" in status_line(app), what="the generating phase")
        await wait_for(pilot, lambda: not app.main_screen.turn_running, what="the first turn to end")
        assert status_line(app).startswith(" ready ") and "generating" not in status_line(app)

        await send(pilot, app, "second")  # the model has answered once: it is loaded
        await wait_for(pilot, lambda: "reading the prompt" in status_line(app), what="the second turn's phase")
        assert "loading the model" not in status_line(app)
        await wait_for(pilot, lambda: not app.main_screen.turn_running, what="the second turn to end")


@pytest.mark.timeout(60)
async def test_the_phase_names_the_running_tool_and_the_approval_awaited(
    git_repo: Path, script, tmp_path: Path
) -> None:
    model = script(
        turn(call("run_command", {"command": "sleep 2"})),
        turn(call("finish", {"summary": "done"})),
    )
    app = make_app(git_repo, model, tmp_path / "feedback.db", approval="ask")
    async with app.run_test(size=(120, 32)) as pilot:
        await session_ready(pilot, app)
        await send(pilot, app, "wait a bit")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalModal), what="the approval dialog")
        assert "waiting for your approval" in status_line(app)
        await pilot.press("ctrl+y")
        await wait_for(pilot, lambda: "running run_command" in status_line(app), what="the command's phase")
        await wait_for(pilot, lambda: not app.main_screen.turn_running, what="the turn to end")
        assert status_line(app).startswith(" ready ")
