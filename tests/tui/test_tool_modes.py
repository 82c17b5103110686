"""Text and grammar tool modes: the model writes its calls in its reply; the chat shows the reply's
words once, never the raw call, and the tool log shows the parsed calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import Markdown

from agent.config import Settings
from tests.conftest import turn
from tests.tui.helpers import send, session_ready, wait_for
from tui import create_app
from tui.app import TeachbackApp
from tui.widgets.chat import ChatView
from tui.widgets.tool_log import ToolLog


def written_call(name: str, arguments: dict) -> str:
    return json.dumps({"name": name, "arguments": arguments})


def answers(app: TeachbackApp) -> list[str]:
    return [m.source for m in app.main_screen.query_one(ChatView).query(Markdown)]


async def run_one_turn(app: TeachbackApp, pilot) -> None:
    await session_ready(pilot, app)
    await send(pilot, app, "read app.py")
    await wait_for(pilot, lambda: app.main_screen.query(".notice"), what="the turn to end")


@pytest.mark.timeout(60)
async def test_grammar_mode_shows_the_parsed_calls_and_no_raw_json(git_repo: Path, script, tmp_path: Path) -> None:
    model = script(
        turn(content=written_call("read_file", {"path": "app.py"})),
        turn(content=written_call("finish", {"summary": "Read it."})),
    )
    settings = Settings(model=model, tool_mode="grammar", approval="full-auto")
    app = create_app(git_repo, settings, store_path=tmp_path / "feedback.db")
    async with app.run_test(size=(100, 32)) as pilot:
        await run_one_turn(app, pilot)
        assert answers(app) == []
        shown = "\n".join(str(w.render()) for w in app.main_screen.query_one(ChatView).children)
        assert '"name"' not in shown and "read_file" not in shown
        titles = [entry.title for entry in app.main_screen.query_one(ToolLog).entries]
        assert titles == ["✓ read_file app.py", "✓ finish"]


@pytest.mark.timeout(60)
async def test_text_mode_shows_the_words_once_without_the_call(git_repo: Path, script, tmp_path: Path) -> None:
    model = script(
        turn(
            content=f"Let me look at **app.py**.\n<tool_call>\n{written_call('read_file', {'path': 'app.py'})}\n</tool_call>"
        ),
        turn(content="It greets by name."),
    )
    settings = Settings(model=model, tool_mode="text", approval="full-auto")
    app = create_app(git_repo, settings, store_path=tmp_path / "feedback.db")
    async with app.run_test(size=(100, 32)) as pilot:
        await run_one_turn(app, pilot)
        assert answers(app) == ["Let me look at **app.py**.", "It greets by name."]
        assert [entry.title for entry in app.main_screen.query_one(ToolLog).entries] == ["✓ read_file app.py"]
