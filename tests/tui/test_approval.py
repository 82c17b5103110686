"""The approval dialog: typing a reason never decides; only ctrl+y, ctrl+n, Esc, Enter or a button does,
and the reason reaches the recorded denial."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Button, Input, Label

from feedback_store import open_store
from tests.conftest import call, turn
from tests.tui.helpers import make_app, send, session_ready, wait_for
from tui.app import TeachbackApp
from tui.screens.modals import ApprovalModal
from tui.widgets.tool_log import ToolLog

# Letters a y/n hotkey would take, spaces, punctuation, capitals and digits.
REASON = "why? yes it's wrong, don't: No -- not now (try `make test` #2)! Y/N"


def command_script(script) -> str:
    return script(
        turn(call("run_command", {"command": "rm -rf build"})),
        turn(call("finish", {"summary": "done"})),
    )


async def approval_open(pilot, app: TeachbackApp) -> ApprovalModal:
    await session_ready(pilot, app)
    await send(pilot, app, "clean up")
    await wait_for(pilot, lambda: isinstance(app.screen, ApprovalModal), what="the approval dialog")
    return app.screen  # type: ignore[return-value]


def denied_call(app: TeachbackApp):
    return next(e for e in app.main_screen.query_one(ToolLog).entries if e.name_ == "run_command")


@pytest.mark.timeout(90)
@pytest.mark.parametrize("focus", ["#approval-comment", "#approve", "#deny", "#approval-detail"])
async def test_typing_a_reason_anywhere_never_decides_and_the_reason_is_recorded_with_the_denial(
    git_repo: Path, script, tmp_path: Path, focus: str
) -> None:
    db = tmp_path / "feedback.db"
    app = make_app(git_repo, command_script(script), db, approval="ask")
    async with app.run_test(size=(100, 32)) as pilot:
        dialog = await approval_open(pilot, app)
        dialog.query_one(focus).focus()
        await pilot.pause()
        await pilot.press(*REASON)
        await pilot.pause(0.2)
        assert app.screen is dialog and dialog.is_attached  # nothing approved, denied or closed it
        assert dialog.query_one("#approval-comment", Input).value == REASON
        assert app.main_screen.turn_running
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: not app.main_screen.turn_running, what="the turn to end")
        entry = denied_call(app)
        assert entry.error_kind == "denied"
        assert REASON in str(entry.query_one(".tool-result").render())
    with open_store(db) as store:
        (session,) = store.list_sessions()
        resolved = [e for e in store.events(session.id) if e["type"] == "approval_resolved"]
        denied = [p for p in store.pairs(session_id=session.id) if p.error_kind == "denied"]
    assert [(e["approved"], e["comment"]) for e in resolved] == [(False, REASON)]
    assert len(denied) == 1 and REASON in denied[0].feedback
    assert (git_repo / "old.txt").exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("decide", [("ctrl+y",), ("tab", "enter")], ids=["ctrl+y", "enter-on-approve"])
async def test_the_approve_key_or_the_approve_button_approves(
    git_repo: Path, script, tmp_path: Path, decide: tuple[str, ...]
) -> None:
    model = script(
        turn(call("edit_file", {"path": "app.py", "old_text": "'Hello, '", "new_text": "'Hi, '"})),
        turn(call("finish", {"summary": "done"})),
    )
    app = make_app(git_repo, model, tmp_path / "feedback.db", approval="ask")
    async with app.run_test(size=(100, 32)) as pilot:
        dialog = await approval_open(pilot, app)
        await pilot.press("y", "e", "s")  # typed into the reason, no verdict
        assert app.screen is dialog and dialog.query_one("#approval-comment", Input).value == "yes"
        await pilot.press(*decide)  # from the reason line, Tab moves to Approve
        await wait_for(pilot, lambda: not app.main_screen.turn_running, what="the turn to end")
    assert "'Hi, '" in (git_repo / "app.py").read_text()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("decide", [("escape",), ("enter",), ("click",)], ids=["escape", "enter-in-reason", "button"])
async def test_esc_enter_in_the_reason_and_the_deny_button_deny_with_the_reason(
    git_repo: Path, script, tmp_path: Path, decide: tuple[str, ...]
) -> None:
    app = make_app(git_repo, command_script(script), tmp_path / "feedback.db", approval="ask")
    async with app.run_test(size=(100, 32)) as pilot:
        dialog = await approval_open(pilot, app)
        await pilot.press(*"keep it")
        if decide == ("click",):
            await pilot.click("#deny")
        else:
            await pilot.press(*decide)
        await wait_for(pilot, lambda: not app.main_screen.turn_running, what="the turn to end")
        assert app.screen is not dialog
        entry = denied_call(app)
        assert entry.error_kind == "denied" and "keep it" in str(entry.query_one(".tool-result").render())
    assert (git_repo / "old.txt").exists()


@pytest.mark.timeout(60)
async def test_the_buttons_are_labelled_approve_and_deny_and_the_keys_are_shown(
    git_repo: Path, script, tmp_path: Path
) -> None:
    app = make_app(git_repo, command_script(script), tmp_path / "feedback.db", approval="ask")
    async with app.run_test(size=(100, 32)) as pilot:
        dialog = await approval_open(pilot, app)
        approve, deny = dialog.query_one("#approve", Button), dialog.query_one("#deny", Button)
        assert str(approve.label).startswith("Approve") and str(deny.label).startswith("Deny")
        # What is drawn, not the label's source: "[y]" used to be read as a markup tag and vanish.
        assert "ctrl+y" in str(approve.render()) and "ctrl+n" in str(deny.render())
        hint = str(dialog.query_one("#approval-keys", Label).render())
        assert "ctrl+y approves" in hint and "ctrl+n" in hint and "Esc" in hint
        await pilot.press("ctrl+n")
