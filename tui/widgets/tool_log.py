"""The tool calls of the current session: one expandable entry per call, errors marked."""

from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Collapsible, Static

from agent.protocol import EditApplied, LessonsShown, ToolCallFinished, ToolCallStarted
from common.text import one_line
from tui.formatting import pretty_json

MAX_RESULT_CHARS = 4000


class ToolEntry(Collapsible):
    """One tool call: collapsed to a title line; expanded, its arguments and the result text."""

    def __init__(self, started: ToolCallStarted) -> None:
        self.name_ = started.name
        self.target = started.target
        # Kept, not queried: a call can finish before the collapsible's contents are mounted.
        self.result = Static("running…", classes="tool-result", markup=False)
        super().__init__(
            Static(_arguments_text(started.arguments), classes="tool-arguments", markup=False),
            self.result,
            title=_title("…", started.name, self.target),
            collapsed=True,
            classes="tool-entry -running",
        )
        self.ok: bool | None = None
        self.error_kind: str | None = None

    def finish(self, finished: ToolCallFinished) -> None:
        self.ok = finished.ok
        self.error_kind = finished.error_kind
        self.target = finished.target or self.target
        self.remove_class("-running")
        result = finished.result
        if len(result) > MAX_RESULT_CHARS:
            result = result[:MAX_RESULT_CHARS] + f"\n… ({len(finished.result) - MAX_RESULT_CHARS} more characters)"
        self.result.update(Text(result))
        if finished.ok:
            self.title = _title("✓", self.name_, self.target)
            return
        self.add_class("-error")
        problem = f"exit code {finished.exit_code}" if finished.exit_code is not None else finished.error_kind
        self.title = _title("✗", self.name_, self.target, problem or "error")
        # The feedback text is what the model is told and what the training pair holds: show it.
        self.collapsed = False

    def add_lessons(self, event: LessonsShown) -> None:
        """The lessons that followed this call's result in what the model read."""
        self.mount(Static(Text(lessons_text(event)), classes="tool-lessons"))

    def mark_syntax_error(self, message: str) -> None:
        self.add_class("-error")
        self.title = _title("✗", self.name_, self.target, "syntax error")
        self.mount(Static(Text(f"The edit left the file unparseable: {message}"), classes="tool-lint"))
        self.collapsed = False


class ToolLog(VerticalScroll):
    """Entries keyed by call id, newest at the bottom."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._entries: dict[str, ToolEntry] = {}

    def on_mount(self) -> None:
        self.anchor()

    async def started(self, event: ToolCallStarted) -> None:
        entry = ToolEntry(event)
        self._entries[event.call_id] = entry
        await self.mount(entry)

    async def finished(self, event: ToolCallFinished) -> None:
        entry = self._entries.get(event.call_id)
        if entry is None:  # a call whose start we did not see (e.g. subscribed mid-turn)
            entry = ToolEntry(
                ToolCallStarted(
                    session_id=event.session_id, call_id=event.call_id, name=event.name, arguments="", step=event.step
                )
            )
            self._entries[event.call_id] = entry
            await self.mount(entry)
        entry.finish(event)

    def edit_applied(self, event: EditApplied) -> None:
        entry = self._entries.get(event.call_id)
        if entry is not None and event.syntax_error:
            entry.mark_syntax_error(event.syntax_error)

    async def lessons_shown(self, event: LessonsShown) -> None:
        """Lessons the model was shown: under the failing call they followed, or (at the start of the
        session) as an entry of their own."""
        entry = self._entries.get(event.call_id or "")
        if entry is not None:
            entry.add_lessons(event)
            return
        count = len(event.lessons)
        await self.mount(
            Collapsible(
                Static(Text(lessons_text(event)), classes="tool-lessons"),
                title=f"• {count} lesson{'s' * (count != 1)} from earlier sessions",
                collapsed=True,
                classes="tool-entry",
            )
        )

    @property
    def entries(self) -> list[ToolEntry]:
        return list(self._entries.values())

    async def clear(self) -> None:
        self._entries.clear()
        await self.remove_children()


def lessons_text(event: LessonsShown) -> str:
    lines = [f"Lessons shown to the model ({event.tokens} tokens):"]
    lines += [f"- [{lesson['id']}] {lesson['text']}" for lesson in event.lessons]
    return "\n".join(lines)


def _title(mark: str, name: str, target: str | None, problem: str | None = None) -> str:
    title = f"{mark} {name}"
    if target:
        title += f" {one_line(target, 40)}"
    if problem:
        title += f" — {problem}"
    return title


def _arguments_text(arguments: str) -> Text:
    return Text(pretty_json(arguments)[:MAX_RESULT_CHARS], style="dim")
