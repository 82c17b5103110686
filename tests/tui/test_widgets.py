"""The chat screen's widgets on their own, fed real protocol events."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from textual.app import App, ComposeResult
from textual.widgets import Markdown

from agent.protocol import (
    AssistantDelta,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)
from tui.relay import AssistantText, EventRelay, SessionEvent
from tui.widgets.charts import bar, bar_chart
from tui.widgets.chat import ChatView
from tui.widgets.diff_view import ChangeList, unified_diff
from tui.widgets.instruction import InstructionInput
from tui.widgets.status_bar import StatusBar, compact, display_model
from tui.widgets.tool_log import ToolLog

SID = "session-1"


class Harness(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.received: list[object] = []
        self.sent: list[str] = []

    def compose(self) -> ComposeResult:
        yield ChatView(id="chat")
        yield ToolLog(id="tools")
        yield InstructionInput(id="instruction")
        yield StatusBar(id="status")

    def on_session_event(self, message: SessionEvent) -> None:
        self.received.append(message.event)

    def on_assistant_text(self, message: AssistantText) -> None:
        self.received.append(message.text)

    def on_instruction_input_sent(self, message: InstructionInput.Sent) -> None:
        self.sent.append(message.text)


async def test_relay_coalesces_a_delta_flood_and_keeps_order() -> None:
    app = Harness()
    async with app.run_test() as pilot:
        relay = EventRelay(app)
        for n in range(200):
            relay(AssistantDelta(session_id=SID, text=f"{n} "))
        relay(TurnFinished(session_id=SID, turn=1, reason="answered"))
        await pilot.pause(0.1)
    texts = [item for item in app.received if isinstance(item, str)]
    assert "".join(texts) == "".join(f"{n} " for n in range(200))
    assert len(texts) < 10  # one message per frame, not one per delta
    assert isinstance(app.received[-1], TurnFinished)  # the text was flushed before the next event


async def test_relay_accepts_events_from_another_thread() -> None:
    app = Harness()
    async with app.run_test() as pilot:
        relay = EventRelay(app)
        await asyncio.to_thread(relay, TurnFinished(session_id=SID, turn=1, reason="finished"))
        await pilot.pause(0.05)
    assert [type(e) for e in app.received] == [TurnFinished]


async def test_tool_log_marks_errors_and_shows_their_feedback() -> None:
    app = Harness()
    async with app.run_test() as pilot:
        log = app.query_one(ToolLog)
        await log.started(
            ToolCallStarted(session_id=SID, call_id="c1", name="read_file", arguments='{"path": "app.py"}', step=1)
        )
        await log.finished(
            ToolCallFinished(
                session_id=SID,
                call_id="c1",
                name="read_file",
                ok=True,
                result="def greet(name): ...",
                step=1,
                target="app.py",
            )
        )
        await log.started(
            ToolCallStarted(
                session_id=SID, call_id="c2", name="edit_file", arguments='{"path": "app.py", "old": "nope"', step=2
            )
        )
        await log.finished(
            ToolCallFinished(
                session_id=SID,
                call_id="c2",
                name="edit_file",
                ok=False,
                result="malformed JSON: expected '}' at char 31",
                step=2,
                error_kind="malformed_json",
            )
        )
        await pilot.pause()
        ok, failed = log.entries
        assert ok.title == "✓ read_file app.py" and ok.collapsed
        assert failed.title == "✗ edit_file — malformed_json"  # no target: the JSON did not parse
        assert failed.has_class("-error") and not failed.collapsed
        assert "expected '}'" in str(failed.query_one(".tool-result").render())


async def test_chat_streams_into_one_markdown_and_shows_unstreamed_answers() -> None:
    app = Harness()
    async with app.run_test() as pilot:
        chat = app.query_one(ChatView)
        await chat.add_user("fix the bug")
        await chat.append_assistant("Looking at **app.py**")
        await chat.append_assistant(" now.")
        await chat.finish_assistant("Looking at **app.py** now.")
        await chat.finish_assistant("Done.")
        await pilot.pause()
        answers = chat.query(Markdown)
        assert [m.source for m in answers] == ["Looking at **app.py** now.", "Done."]


async def test_instruction_history_walks_back_and_forth() -> None:
    app = Harness()
    async with app.run_test() as pilot:
        line = app.query_one(InstructionInput)
        line.focus()
        for text in ("first", "second"):
            await pilot.press(*text, "enter")
        await pilot.press(*"dra")
        await pilot.press("up")
        assert line.value == "second"
        await pilot.press("up", "up")
        assert line.value == "first"
        await pilot.press("down", "down")
        assert line.value == "dra"
        await pilot.press("enter")
        await pilot.pause()
    assert app.sent == ["first", "second", "dra"]


async def test_status_bar_accumulates_usage() -> None:
    app = Harness()
    async with app.run_test() as pilot:
        status = app.query_one(StatusBar)
        status.model = "scripted//tmp/x/script.json"
        status.approval = "ask"
        status.add_usage(1, 100, 0.001)
        status.add_usage(2, 50, 0.002)
        await pilot.pause()
        rendered = str(status.render())
    assert "scripted/script.json" in rendered and "step 2" in rendered and "150 tok" in rendered
    assert "$0.0030" in rendered and "approval ask" in rendered


@dataclass
class Change:
    path: str
    kind: str
    before: str | None
    after: str | None
    new_path: str | None = None


def test_unified_diff_of_created_modified_and_deleted_files() -> None:
    modified = unified_diff(Change("app.py", "modify", "a\nb\n", "a\nc\n"))
    assert "--- a/app.py\n+++ b/app.py\n" in modified and "-b\n+c\n" in modified
    assert unified_diff(Change("new.py", "create", None, "x\n")).startswith("--- /dev/null\n+++ b/new.py")
    assert "+++ /dev/null" in unified_diff(Change("old.txt", "delete", "gone", None))
    assert "\\ No newline at end of file" in unified_diff(Change("old.txt", "delete", "gone", None))


async def test_change_list_marks_verdicts() -> None:
    class ListApp(App[None]):
        def compose(self) -> ComposeResult:
            yield ChangeList([Change("app.py", "modify", "a", "b"), Change("util.py", "modify", "c", "d")])

    app = ListApp()
    async with app.run_test():
        changes = app.query_one(ChangeList)
        changes.highlighted = 1
        assert changes.current_path == "util.py"
        changes.set_verdict("util.py", "rejected")
        assert str(changes.get_option("util.py").prompt).startswith("✗ util.py")
        assert changes.verdicts == {"app.py": None, "util.py": "rejected"}


def test_bars_model_names_and_counts() -> None:
    assert [compact(n) for n in (999, 1234, 2_500_000)] == ["999", "1.2k", "2.5M"]
    assert bar(0.5, 4) == "██  "
    assert bar(1.5, 2) == "██"
    chart = bar_chart([("edit_file", 0.25, "25%")], label_width=10, bar_width=8).plain
    assert chart == "edit_file  ██       25%"
    assert display_model("scripted//home/u/s.json") == "scripted/s.json"
    assert display_model("anthropic/claude-sonnet-4-5") == "anthropic/claude-sonnet-4-5"
