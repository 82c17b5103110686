"""ask -> one workspace/applyEdit with exactly the scripted change, progress, untitled buffers."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pygls.uris import from_fs_path

from tests.lsp.harness import (
    apply_text_edits,
    command,
    event_types,
    lsp_session,
    scripted,
    wait_for,
)

APP_UNSAVED = "def greet(name):\n    return 'Hello, ' + name\n\n\nprint(greet('you'))\n"
APP_AFTER = "def greet(name):\n    return f'Hello, {name}!'\n\n\nprint(greet('you'))\n"
UTIL_BEFORE = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
UTIL_AFTER = 'def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    """a minus b"""\n    return a - b\n'
GREETINGS = "from app import greet\n\nGREETING = greet('world')\n"


def options(tmp_path: Path, script: str, **extra: object) -> dict:
    return {"model": scripted(script), "approval": "auto-edit", "db": str(tmp_path / "feedback.db"), **extra}


@pytest.mark.timeout(90)
async def test_ask_sends_one_apply_edit_with_exactly_the_scripted_change(git_repo: Path, tmp_path: Path) -> None:
    async with lsp_session(git_repo, options(tmp_path, "multi_file.json")) as (client, editor):
        app_uri = editor.open(git_repo / "app.py")
        editor.type_text(app_uri, APP_UNSAVED)  # unsaved: the disk still has the committed text
        committed, seen = (git_repo / "app.py").read_bytes(), (git_repo / "app.py").stat().st_mtime_ns

        result = await command(client, "teachback.ask", {"instruction": "tidy up", "uri": app_uri})

        assert result["reason"] == "finished" and result["applied"] is True
        assert len(editor.applied) == 1
        changes = editor.applied[0].edit.document_changes
        by_uri: dict[str, list] = {}
        for change in changes:
            key = getattr(change, "uri", None) or change.text_document.uri
            by_uri.setdefault(key, []).append(change)
        app, util, new = (from_fs_path(str(git_repo / n)) for n in ("app.py", "util.py", "greetings.py"))
        assert set(by_uri) == {app, util, new}
        (app_edit,) = by_uri[app]
        assert app_edit.text_document.version == 2  # the open buffer, at the version the editor has
        assert apply_text_edits(APP_UNSAVED, app_edit.edits) == APP_AFTER
        (util_edit,) = by_uri[util]
        assert util_edit.text_document.version is None
        assert apply_text_edits(UTIL_BEFORE, util_edit.edits) == UTIL_AFTER
        create, fill = by_uri[new]
        assert isinstance(create, types.CreateFile)
        assert apply_text_edits("", fill.edits) == GREETINGS
        assert changes.index(create) < changes.index(fill)

        # The editor's view and the disk agree with the agent once the edit is applied.
        assert editor.text(app_uri) == APP_AFTER
        assert (git_repo / "util.py").read_text() == UTIL_AFTER
        assert (git_repo / "greetings.py").read_text() == GREETINGS
        # The open file is back as the editor saw it, bytes and time, so no editor asks about a file
        # changed under its buffer; the buffer carries the change, and saving it writes it.
        assert (git_repo / "app.py").read_bytes() == committed
        assert (git_repo / "app.py").stat().st_mtime_ns == seen
        editor.save(app_uri)
        assert (git_repo / "app.py").read_text() == APP_AFTER

        (reports,) = client.progress_reports.values()
        kinds = [r.kind for r in reports]
        assert kinds[0] == "begin" and kinds[-1] == "end" and "report" in kinds
        assert any("edit_file" in (r.message or "") for r in reports if r.kind == "report")
        assert {"turn_started", "edit_applied", "turn_finished"} <= set(event_types(editor))
        assert any("[edit " in m.message for m in client.log_messages)


@pytest.mark.timeout(90)
async def test_untitled_buffer_goes_inline_and_is_never_a_path(git_repo: Path, tmp_path: Path) -> None:
    async with lsp_session(git_repo, options(tmp_path, "answer_only.json")) as (client, editor):
        uri = "untitled:Untitled-1"
        editor.open(Path("unused"), text="x = 1\ny = x +\n", uri=uri)
        actions = await client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=types.Range(start=types.Position(line=1, character=0), end=types.Position(line=2, character=0)),
                context=types.CodeActionContext(diagnostics=[]),
            )
        )
        assert [a.title for a in actions] == [
            "teachback: explain this code",
            "teachback: implement or refactor the selection",
            "teachback: write tests for this",
        ]
        explain = actions[0].command
        result = await command(client, explain.command, *explain.arguments)
        assert result["reason"] == "answered" and result["files"] == []
        await wait_for(lambda: "turn_started" in event_types(editor), what="turn_started")
        started = next(e for e in editor.events if e["type"] == "turn_started")
        assert "y = x +" in started["message"]["content"] and "x = 1" not in started["message"]["content"]
        assert "not a file in the workspace" in started["message"]["content"]
        assert started["context"] == []
        assert not (git_repo / "Untitled-1").exists()
        status = await command(client, "teachback.status")
        assert status["openDocuments"] == 1


@pytest.mark.timeout(90)
async def test_fix_action_puts_the_diagnostics_in_the_prompt(git_repo: Path, tmp_path: Path) -> None:
    async with lsp_session(git_repo, options(tmp_path, "answer_only.json")) as (client, editor):
        uri = editor.open(git_repo / "app.py")
        problem = types.Diagnostic(
            range=types.Range(start=types.Position(line=1, character=4), end=types.Position(line=1, character=10)),
            message="name 'nme' is not defined",
            severity=types.DiagnosticSeverity.Error,
            source="pyflakes",
        )
        actions = await client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri=uri),
                range=problem.range,
                context=types.CodeActionContext(diagnostics=[problem], only=[types.CodeActionKind.QuickFix]),
            )
        )
        assert len(actions) == 1 and actions[0].kind == types.CodeActionKind.QuickFix
        fix = actions[0].command
        await command(client, fix.command, *fix.arguments)
        started = next(e for e in editor.events if e["type"] == "turn_started")
        assert "name 'nme' is not defined [pyflakes]" in started["message"]["content"]
        assert started["context"][0]["path"] == "app.py"
        assert started["context"][0]["start_line"] == 2


@pytest.mark.timeout(90)
async def test_a_turn_that_fails_is_shown_as_an_error_message(git_repo: Path, tmp_path: Path) -> None:
    async with lsp_session(git_repo, options(tmp_path, "model_fails.json")) as (client, editor):
        result = await command(client, "teachback.ask", {"instruction": "tidy up"})

        assert result["reason"] == "error"
        errors = [m for m in client.messages if m.type == types.MessageType.Error]
        assert [m.message for m in errors] == [f"teachback: the turn failed: {result['summary']}"]
        assert "failed (auth)" in result["summary"]
