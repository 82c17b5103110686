"""Plan mode in the terminal app: ctrl+t switches it on, the refused calls change nothing, the plan
dialog sends a plan back with a reason (a `user` pair) and approves the next one, whose edits land."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input

from feedback_store import open_store
from tests.conftest import call, git, turn
from tests.tui.helpers import make_app, send, session_ready, wait_for
from tui.screens.modals import PlanModal
from tui.screens.review import ReviewScreen
from tui.widgets.status_bar import StatusBar

PLAN_ONE = "1. Greet with Hi in app.py."
PLAN_TWO = "1. Greet with Howdy in app.py."


@pytest.mark.timeout(120)
async def test_plan_mode_from_the_key_to_the_approved_edit(git_repo: Path, script, tmp_path: Path) -> None:
    model = script(
        turn(call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Hi"})),
        turn(call("run_command", {"command": "echo ran > ran.txt"}), call("delete_file", {"path": "old.txt"})),
        turn(content=PLAN_ONE),
        turn(content=PLAN_TWO),
        turn(call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Howdy"})),
        turn(call("finish", {"summary": "greeting changed"})),
    )
    db = tmp_path / "feedback.db"
    app = make_app(git_repo, model, db, approval="auto-edit")
    before = git(git_repo, "status", "--porcelain")
    async with app.run_test(size=(110, 36)) as pilot:
        await session_ready(pilot, app)
        status = app.main_screen.query_one(StatusBar)
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: status.approval == "plan", what="plan mode")
        await send(pilot, app, "greet differently")
        await wait_for(pilot, lambda: isinstance(app.screen, PlanModal), what="the plan dialog")
        assert app.screen.plan.plan == PLAN_ONE
        assert git(git_repo, "status", "--porcelain") == before and not (git_repo / "ran.txt").exists()

        await pilot.press("enter")  # no reason: the plan does not go back without one
        await pilot.pause(0.2)
        assert isinstance(app.screen, PlanModal)
        app.screen.query_one("#plan-reason", Input).value = "say Howdy"
        await pilot.press("ctrl+n")
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, PlanModal) and app.screen.plan.plan == PLAN_TWO,
            what="the revised plan",
        )
        await pilot.press("ctrl+y")
        await wait_for(pilot, lambda: "Howdy" in (git_repo / "app.py").read_text(), what="the edit")
        # the turn's end is shown: its edit opens the review
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen), what="the review of the edit")
        assert status.approval == "auto-edit"

    store = open_store(db)
    pairs = store.pairs()
    (sent_back,) = [p for p in pairs if p.source == "user"]
    assert sent_back.completion["content"] == PLAN_ONE and "say Howdy" in sent_back.feedback
    assert sent_back.correction["content"] == PLAN_TWO
    assert {p.tool for p in pairs if p.error_kind == "denied"} == {"edit_file", "run_command", "delete_file"}
    store.close()
