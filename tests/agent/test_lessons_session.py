"""Sessions with lessons: a mistake already recorded in the store brings its lesson into the tool
result the model reads; the start-of-session block; lessons shown are events, recorded and shown."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from textual.app import App, ComposeResult

from agent.config import Settings
from agent.protocol import Lessons, LessonsShown, SessionStarted, ToolCallFinished, ToolCallStarted, UserInput
from agent.runtime import open_session
from cli.entry import main
from feedback_store import Recorder, open_store
from feedback_store.lessons.book import book_for as open_lessons
from lsp_server.describe import log_line
from tests.conftest import call, git, turn
from tui.widgets.tool_log import ToolLog

BAD = call("edit_file", {"path": "app.py", "old_text": "return 'Hi, ' + name", "new_text": "return 'Hey, ' + name"})
GOOD = call("edit_file", {"path": "app.py", "old_text": "return 'Hello, ' + name", "new_text": "return 'Hey, ' + name"})


async def run(root: Path, settings: Settings, lessons=None):
    """One recorded session; returns (session, its events)."""
    store = open_store(settings.db_path())
    session = open_session(root, settings, lessons=lessons)
    events = []
    session.subscribe(Recorder(store))
    session.subscribe(events.append)
    await session.run(UserInput(text="say hey"))
    store.close()
    return session, events


def settings_for(model: str, tmp_path: Path, **more) -> Settings:
    return Settings(model=model, approval="full-auto", repo_map_tokens=0, db=str(tmp_path / "f.db"), **more)


async def learn_once(git_repo: Path, script, tmp_path: Path) -> None:
    """A first session that fails an edit, reads the file and gets it right."""
    await run(
        git_repo,
        settings_for(
            script(turn(BAD), turn(call("read_file", {"path": "app.py"})), turn(GOOD), name="first.json"), tmp_path
        ),
    )
    git(git_repo, "checkout", "app.py")


async def test_a_recorded_mistake_brings_its_lesson_into_the_tool_result(git_repo, script, tmp_path):
    await learn_once(git_repo, script, tmp_path)
    settings = settings_for(script(turn(BAD), turn(GOOD), name="second.json"), tmp_path)
    book = open_lessons(settings)  # as `teachback run` wires it
    session, events = await run(git_repo, settings, book)
    failed = next(e for e in events if isinstance(e, ToolCallFinished) and not e.ok)
    assert "Lessons from earlier sessions about failures like this one:" in failed.message["content"]
    assert '- Do this: edit_file(path="app.py", old_text="return \'Hello, \' + name"' in failed.message["content"]
    assert "an earlier edit_file failed: no_match; copy old_text exactly" in failed.message["content"]
    assert "Lessons from" not in failed.result  # the tool's own text: what the pair's feedback holds
    shown = [e for e in events if isinstance(e, LessonsShown) and e.moment == "tool_result"]
    assert [e.call_id for e in shown] == [failed.call_id] and failed.message["content"].endswith(shown[0].text)
    store = open_store(settings.db_path())
    assert [
        r["type"]
        for r in store.query("SELECT type FROM events WHERE session_id = ? AND type = 'lessons_shown'", (session.id,))
    ] == ["lessons_shown"] * 2
    assert all("Lessons from" not in p.feedback for p in store.pairs(session_id=session.id))
    tool_messages = [m for m in store.conversation(session.id) if m["role"] == "tool"]
    assert tool_messages[0]["content"] == failed.message["content"]  # exports see what the model saw
    book.close()


async def test_the_start_block_is_in_the_system_prompt_and_byte_stable(git_repo, script, tmp_path):
    await learn_once(git_repo, script, tmp_path)
    prompts = []
    for name in ("a.json", "b.json"):
        settings = settings_for(script(turn(call("read_file", {"path": "util.py"})), name=name), tmp_path)
        book = open_lessons(settings)
        _, events = await run(git_repo, settings, book)
        book.close()
        started = next(e for e in events if isinstance(e, SessionStarted))
        shown = next(e for e in events if isinstance(e, LessonsShown))
        assert shown.moment == "session_start" and started.system_prompt.endswith(shown.text)
        assert 0 < shown.tokens <= settings.lessons_tokens
        prompts.append(started.system_prompt.encode())
    assert prompts[0] == prompts[1]


async def test_lessons_off_means_none_are_shown(git_repo, script, tmp_path):
    await learn_once(git_repo, script, tmp_path)
    settings = settings_for(script(turn(BAD), name="second.json"), tmp_path, lessons=False)
    assert open_lessons(settings) is None
    book = open_lessons(settings.replace(lessons=True))
    _, events = await run(git_repo, settings, book)  # a source given, the setting still wins
    assert not [e for e in events if isinstance(e, LessonsShown)]
    book.close()


async def test_a_lesson_is_shown_once_per_session(git_repo, script, tmp_path):
    await learn_once(git_repo, script, tmp_path)
    settings = settings_for(
        script(turn(BAD), turn(call("read_file", {"path": "app.py"})), turn(BAD), name="second.json"), tmp_path
    )
    book = open_lessons(settings)
    _, events = await run(git_repo, settings, book)
    failures = [e for e in events if isinstance(e, ToolCallFinished) and not e.ok]
    assert len(failures) == 2
    assert "Lessons from" in failures[0].message["content"] and "Lessons from" not in failures[1].message["content"]
    book.close()


class BrokenSource:
    """A lesson source whose database is gone: the session must go on without lessons."""

    def session_block(self, workspace: str, model: str, budget_tokens: int, focus: str = "", **where) -> Lessons:
        raise OSError("disk gone")

    def for_failure(self, **situation) -> Lessons:
        raise OSError("disk gone")

    def known_failure(self, **call) -> None:
        raise OSError("disk gone")

    def close(self) -> None:
        return None


async def test_a_failing_lesson_source_does_not_stop_the_session(git_repo, script, tmp_path):
    settings = settings_for(script(turn(BAD), turn(GOOD)), tmp_path)
    session, events = await run(git_repo, settings, BrokenSource())
    assert events[-1].reason == "answered" and "Hey" in (git_repo / "app.py").read_text()


def test_teachback_run_shows_the_lessons_it_gave(git_repo, script, tmp_path, capsys):
    asyncio.run(learn_once(git_repo, script, tmp_path))
    model = script(turn(BAD), turn(GOOD), name="second.json")
    code = main(
        [
            "run",
            "--workspace",
            str(git_repo),
            "--model",
            model,
            "--approval",
            "full-auto",
            "--db",
            str(tmp_path / "f.db"),
            "--json",
            "say hey",
        ]
    )
    assert code == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [e["moment"] for e in events if e["type"] == "lessons_shown"] == ["session_start", "tool_result"]


def shown_event() -> LessonsShown:
    lesson = {
        "id": "L123",
        "text": "edit_file on app.py failed (no_match): ...",
        "origin": "distilled",
        "scope": "workspace",
        "pinned": False,
    }
    return LessonsShown(session_id="s", moment="tool_result", call_id="c1", lessons=[lesson], text="...", tokens=9)


def test_the_language_server_log_names_the_lessons_shown():
    line, _ = log_line(shown_event())
    assert line.startswith("[lessons] 1 shown to the model after the failed call c1:")
    assert "[L123] edit_file on app.py failed (no_match)" in line


class LogApp(App):
    def compose(self) -> ComposeResult:
        yield ToolLog(id="tools")


async def test_the_terminal_tool_log_shows_lessons_under_their_call():
    app = LogApp()
    async with app.run_test(size=(100, 30)) as pilot:
        log = app.query_one(ToolLog)
        await log.started(
            ToolCallStarted(session_id="s", call_id="c1", name="edit_file", arguments='{"path": "app.py"}', step=1)
        )
        await log.finished(
            ToolCallFinished(
                session_id="s",
                call_id="c1",
                name="edit_file",
                ok=False,
                result="no",
                step=1,
                error_kind="no_match",
                target="app.py",
            )
        )
        await log.lessons_shown(shown_event())
        await log.lessons_shown(LessonsShown(session_id="s", moment="session_start", lessons=[], text=""))
        await pilot.pause()
        texts = [str(s.render()) for s in app.query(".tool-lessons")]
        assert len(texts) == 2 and "[L123] edit_file on app.py failed" in texts[0]
        assert "tool-lessons" in [c for s in log.entries[0].query(".tool-lessons") for c in s.classes]


async def test_a_call_this_repository_knows_fails_is_answered_by_its_lesson_before_it_runs(git_repo, script, tmp_path):
    wrong, right = call("read_file", {"path": "src/app.py"}), call("read_file", {"path": "app.py"})
    await run(git_repo, settings_for(script(turn(wrong), turn(right), name="first.json"), tmp_path))
    clone = tmp_path / "clone"  # the same repository at another path
    git(git_repo, "clone", "-q", str(git_repo), str(clone))
    settings = settings_for(script(turn(wrong), turn(right), name="second.json"), tmp_path)
    book = open_lessons(settings)
    _, events = await run(clone, settings, book)
    answered = next(e for e in events if isinstance(e, ToolCallFinished) and not e.ok)
    assert answered.result.startswith("Not run: read_file on src/app.py failed before in this repository")
    assert 'Do this: read_file(path="app.py")' in answered.result and answered.error_kind == "not_found"
    assert answered.message["content"].count("Do this:") == 1  # not shown again under the answer
    store = open_store(settings.db_path())
    [pair] = store.query("SELECT error_kind, feedback FROM pairs WHERE session_id = ?", (answered.session_id,))
    assert pair["error_kind"] == "not_found" and pair["feedback"].startswith("Not run:")
    store.close()
    # Once the path exists the call runs.
    (clone / "src").mkdir()
    (clone / "src" / "app.py").write_text("print('here')\n")
    third = settings_for(script(turn(wrong), name="third.json"), tmp_path)
    again = open_lessons(third)
    _, events = await run(clone, third, again)
    assert next(e for e in events if isinstance(e, ToolCallFinished)).ok
    again.close()
    book.close()
