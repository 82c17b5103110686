"""The user's verdicts from the editor reach the feedback store: rejections, corrections, approvals."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from feedback_store import open_store
from tests.lsp.harness import command, lsp_session, scripted, wait_for

UTIL_BEFORE = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"


def user_pairs(db: Path) -> list:
    store = open_store(db)
    try:
        return store.pairs(source="user")
    finally:
        store.close()


@pytest.mark.timeout(90)
async def test_reject_with_a_reason_makes_a_user_pair(git_repo: Path, tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    opts = {"model": scripted("multi_file.json"), "approval": "auto-edit", "db": str(db)}
    async with lsp_session(git_repo, opts) as (client, editor):
        util_uri = editor.open(git_repo / "util.py")
        result = await command(client, "teachback.ask", "document sub")
        util_edit = next(e for e in result["edits"] if e["path"] == "util.py")

        reviewed = await command(
            client, "teachback.reject", {"id": util_edit["id"], "reason": "sub needs no docstring; leave util.py alone"}
        )

        assert reviewed["decision"] == "rejected"
        assert (git_repo / "util.py").read_text() == UTIL_BEFORE
        assert editor.text(util_uri) == UTIL_BEFORE  # the open buffer follows the restored file
    pairs = user_pairs(db)
    assert len(pairs) == 1
    assert "leave util.py alone" in pairs[0].feedback


@pytest.mark.timeout(90)
async def test_editing_agent_written_lines_is_recorded_as_a_correction(git_repo: Path, tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    opts = {"model": scripted("multi_file.json"), "approval": "auto-edit", "db": str(db)}
    async with lsp_session(git_repo, opts) as (client, editor):
        app_uri = editor.open(git_repo / "app.py")
        await command(client, "teachback.ask", {"instruction": "greet politely", "uri": app_uri})
        agent_text = editor.text(app_uri)
        corrected = agent_text.replace("f'Hello, {name}!'", "f'Hello, {name}.'")
        assert corrected != agent_text

        editor.type_text(app_uri, corrected)
        editor.save(app_uri)

        await wait_for(
            lambda: any(e["type"] == "edit_reviewed" and e["decision"] == "corrected" for e in editor.events),
            what="the correction",
        )
        reviewed = next(e for e in editor.events if e["type"] == "edit_reviewed")
        assert reviewed["path"] == "app.py" and reviewed["user_content"] == corrected
    pairs = user_pairs(db)
    assert len(pairs) == 1 and pairs[0].correction is not None


@pytest.mark.timeout(90)
async def test_edit_outside_agent_lines_is_not_a_correction(git_repo: Path, tmp_path: Path) -> None:
    opts = {"model": scripted("multi_file.json"), "approval": "auto-edit", "db": str(tmp_path / "feedback.db")}
    async with lsp_session(git_repo, opts) as (client, editor):
        app_uri = editor.open(git_repo / "app.py")
        await command(client, "teachback.ask", {"instruction": "greet politely", "uri": app_uri})
        editor.type_text(app_uri, "# a comment of the user's own\n" + editor.text(app_uri))
        editor.save(app_uri)
        await command(client, "teachback.status")  # handled after the save: the flush has run
        assert not any(e["type"] == "edit_reviewed" for e in editor.events)


@pytest.mark.timeout(90)
async def test_ask_mode_approval_through_show_message_request(git_repo: Path, tmp_path: Path) -> None:
    opts = {"model": scripted("create_one.json"), "approval": "ask", "db": str(tmp_path / "feedback.db")}
    async with lsp_session(git_repo, opts) as (client, editor):
        editor.answers = ["Deny"]
        result = await command(client, "teachback.ask", "make notes")
        assert len(editor.questions) == 1 and "notes.txt" in editor.questions[0].message
        assert [a.title for a in editor.questions[0].actions] == ["Allow", "Deny"]
        resolved = next(e for e in editor.events if e["type"] == "approval_resolved")
        assert resolved["approved"] is False
        assert result["files"] == [] and not (git_repo / "notes.txt").exists()
        assert editor.applied == []


@pytest.mark.timeout(90)
async def test_reject_command_answers_a_pending_approval_with_a_reason(git_repo: Path, tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    opts = {"model": scripted("create_one.json"), "approval": "ask", "db": str(db)}
    async with lsp_session(git_repo, opts) as (client, editor):
        editor.answers = [None]  # the user dismisses the prompt and answers with the command instead
        asking = asyncio.ensure_future(command(client, "teachback.ask", "make notes"))
        await wait_for(lambda: any(e["type"] == "approval_requested" for e in editor.events), what="approval")
        request = next(e for e in editor.events if e["type"] == "approval_requested")
        await wait_for(lambda: editor.questions, what="the question")
        answer = await command(client, "teachback.reject", request["request_id"], "notes belong in the README")
        assert answer == {"approval": request["request_id"], "approved": False}
        result = await asyncio.wait_for(asking, timeout=30)
        assert result["files"] == []
        resolved = next(e for e in editor.events if e["type"] == "approval_resolved")
        assert resolved["comment"] == "notes belong in the README"
