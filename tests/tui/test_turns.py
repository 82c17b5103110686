"""Whole turns through the app with the scripted model: chat, tool log, review, approval, interrupt."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Markdown

from feedback_store import open_store
from tests.conftest import call, turn
from tests.tui.helpers import make_app, send, session_ready, wait_for
from tui.screens.modals import ApprovalModal, ReasonModal
from tui.screens.review import ReviewScreen
from tui.widgets.chat import ChatView
from tui.widgets.diff_view import ChangeList, DiffView
from tui.widgets.status_bar import StatusBar
from tui.widgets.tool_log import ToolLog

APP_PY = "def greet(name):\n    return 'Hello, ' + name\n"
UTIL_PY = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


def fix_greeting_script(script) -> str:
    return script(
        turn(call("read_file", {"path": "app.py"}), content="Let me look at **app.py** first."),
        turn(call("edit_file", {"path": "app.py", "old_text": "return 'Hi, ' + name", "new_text": "x"})),
        turn(
            call(
                "edit_file",
                {"path": "app.py", "old_text": "return 'Hello, ' + name", "new_text": "return f'Hello, {name}!'"},
            ),
            call("edit_file", {"path": "util.py", "old_text": "return a - b", "new_text": "return b - a"}),
        ),
        turn(call("finish", {"summary": "Greeting fixed."})),
    )


@pytest.mark.timeout(120)
async def test_whole_turn_then_review_rejects_one_file_and_accepts_another(
    git_repo: Path, script, tmp_path: Path
) -> None:
    db = tmp_path / "feedback.db"
    app = make_app(git_repo, fix_greeting_script(script), db)
    async with app.run_test(size=(100, 32)) as pilot:
        await session_ready(pilot, app)
        await send(pilot, app, "fix the greeting")
        await wait_for(
            pilot,
            lambda: (
                isinstance(app.screen, ReviewScreen)
                and app.screen.query(DiffView)
                and app.screen.query_one(DiffView).diff
            ),
            what="the review and its first diff",
        )

        main = app.main_screen
        answers = [m.source for m in main.query_one(ChatView).query(Markdown)]
        assert answers[0] == "Let me look at **app.py** first."
        titles = [entry.title for entry in main.query_one(ToolLog).entries]
        assert titles == [
            "✓ read_file app.py",
            "✗ edit_file app.py — no_match",
            "✓ edit_file app.py",
            "✓ edit_file util.py",
            "✓ finish",
        ]
        failed = main.query_one(ToolLog).entries[1]
        assert not failed.collapsed and "Hello, " in str(failed.query_one(".tool-result").render())
        status = main.query_one(StatusBar)
        assert status.step == 4 and status.tokens > 0

        review = app.screen
        changes = review.query_one(ChangeList)
        assert list(changes.changes) == ["app.py", "util.py"]
        assert "+    return f'Hello, {name}!'" in review.query_one(DiffView).diff

        await pilot.press("down", "r")
        await wait_for(pilot, lambda: isinstance(app.screen, ReasonModal), what="the reason dialog")
        app.screen.query_one("#reason").value = "sub must stay a - b"
        await pilot.press("enter")
        await wait_for(pilot, lambda: changes.verdicts["util.py"] == "rejected", what="the rejection")
        assert (git_repo / "util.py").read_text() == UTIL_PY

        await pilot.press("up", "a")
        await wait_for(pilot, lambda: app.screen is main, what="the review to close")
        assert changes.verdicts == {"app.py": "accepted", "util.py": "rejected"}

        await pilot.press("ctrl+r")  # reopening shows what is left (the rejected file is restored)
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen), what="the review to reopen")
        assert app.screen.query_one(ChangeList).verdicts == {"app.py": "accepted"}
        await pilot.press("escape")
    assert (git_repo / "app.py").read_text() == "def greet(name):\n    return f'Hello, {name}!'\n"
    assert (git_repo / "util.py").read_text() == UTIL_PY

    with open_store(db) as store:
        user_pairs = store.pairs(source="user")
    assert [p.feedback for p in user_pairs if "sub must stay a - b" in p.feedback]
    assert [p.target for p in user_pairs] == ["util.py"]


@pytest.mark.timeout(120)
async def test_ask_mode_approves_an_edit_and_denies_a_command_with_a_reason(
    git_repo: Path, script, tmp_path: Path
) -> None:
    model = script(
        turn(call("edit_file", {"path": "app.py", "old_text": "'Hello, '", "new_text": "'Hi, '"})),
        turn(call("run_command", {"command": "rm -rf build"})),
        turn(call("finish", {"summary": "done"})),
    )
    app = make_app(git_repo, model, tmp_path / "feedback.db", approval="ask")
    async with app.run_test(size=(100, 32)) as pilot:
        await session_ready(pilot, app)
        await send(pilot, app, "say hi")
        await wait_for(pilot, lambda: isinstance(app.screen, ApprovalModal), what="the edit approval")
        assert app.screen.request.action == "edit"
        assert "+    return 'Hi, ' + name" in app.screen.request.detail
        await pilot.press("ctrl+y")
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, ApprovalModal) and app.screen.request.action == "command",
            what="the command approval",
        )
        app.screen.query_one("#approval-comment").value = "never delete build output"
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: isinstance(app.screen, ReviewScreen), what="the review screen")
        entries = app.main_screen.query_one(ToolLog).entries
        denied = next(e for e in entries if e.name_ == "run_command")
        assert denied.error_kind == "denied"
        assert "never delete build output" in str(denied.query_one(".tool-result").render())
    assert "'Hi, '" in (git_repo / "app.py").read_text()


@pytest.mark.timeout(60)
async def test_interrupt_stops_a_running_turn(git_repo: Path, script, tmp_path: Path) -> None:
    model = script(
        turn(
            call("read_file", {"path": "app.py"}),
            content="thinking",
        )
        | {"delay": 30}
    )
    app = make_app(git_repo, model, tmp_path / "feedback.db")
    async with app.run_test(size=(100, 32)) as pilot:
        await session_ready(pilot, app)
        main = app.main_screen
        await send(pilot, app, "take your time")
        await wait_for(pilot, lambda: main.turn_running, what="the turn to start")
        await pilot.pause(0.3)
        await pilot.press("escape")  # the instruction line has focus: the binding has priority
        await wait_for(pilot, lambda: not main.turn_running, timeout=10, what="the interrupt")
        await wait_for(pilot, lambda: main.query(".notice"), timeout=5, what="the turn notice")
        notice = main.query(".notice").last()
        assert "interrupted" in str(notice.render())
        assert main.query_one(StatusBar).state == "ready"
    assert (git_repo / "app.py").read_text() == APP_PY
