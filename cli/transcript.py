"""How the headless CLI shows a session: a readable transcript, or the events as JSON lines."""

from __future__ import annotations

import sys
from typing import TextIO

from agent.protocol import (
    ApprovalRequested,
    AssistantDelta,
    AssistantMessage,
    EditApplied,
    ErrorEvent,
    Event,
    ModeChanged,
    PlanProposed,
    PlanReviewed,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
)
from agent.protocol.textcalls import prose_length
from common.text import one_line

PREVIEW_LINES = 12


class JsonLines:
    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out

    def __call__(self, event: Event) -> None:
        self.out.write(event.to_json() + "\n")
        self.out.flush()


class Transcript:
    """Streams assistant text as it arrives and summarises each tool call in a line or a few.

    With `calls_in_text` (the text and grammar tool modes, where calls arrive inside the reply's
    text) it streams only the prose: a call is shown once, as the line its ToolCallStarted prints,
    and the rest of a reply that holds no call is shown when the reply ends."""

    def __init__(self, out: TextIO = sys.stdout, color: bool | None = None, *, calls_in_text: bool = False) -> None:
        self.out = out
        self.color = out.isatty() if color is None else color
        self.calls_in_text = calls_in_text
        self._streaming = False
        self._reply = ""  # the reply streaming now (calls_in_text)
        self._shown = 0  # how much of it is on screen

    def __call__(self, event: Event) -> None:
        if isinstance(event, AssistantDelta):
            if self.calls_in_text:
                self._reply += event.text
                self._show(prose_length(self._reply))
            else:
                self.out.write(event.text)
                self._streaming = True
        elif isinstance(event, AssistantMessage):
            if self.calls_in_text and not event.message.get("tool_calls"):
                self._show(len(self._reply))  # an answer, or a call that could not be read: shown once
            self._reply, self._shown = "", 0
            self._end_stream()
        elif isinstance(event, ToolCallStarted):
            self._line(self._paint("dim", f"→ {event.name or '(unparsed reply)'} {one_line(event.arguments, 160)}"))
        elif isinstance(event, ToolCallFinished):
            if event.ok:
                self._line(self._paint("green", "  ✓ ") + _first_line(event.result))
            else:
                self._line(self._paint("red", f"  ✗ {event.error_kind}: ") + _preview(event.result))
        elif isinstance(event, EditApplied):
            target = f"{event.path} → {event.new_path}" if event.new_path else event.path
            self._line(self._paint("cyan", f"  {event.kind} {target}"))
            if event.syntax_error:
                self._line(self._paint("yellow", "  ! " + _first_line(event.syntax_error)))
        elif isinstance(event, ApprovalRequested):
            self._line(self._paint("yellow", f"? approve {event.action}: {event.summary}"))
            self._line(_preview(event.detail, 40))
        elif isinstance(event, PlanProposed):
            self._line(self._paint("yellow", "? plan ready for review: approve it or send it back with a reason"))
        elif isinstance(event, PlanReviewed):
            verdict = f"approved (continuing in {event.mode})" if event.approved else f"sent back: {event.comment}"
            self._line(self._paint("yellow", f"plan {verdict}"))
        elif isinstance(event, ModeChanged):
            self._line(self._paint("dim", f"approval mode: {event.previous} → {event.mode}"))
        elif isinstance(event, ErrorEvent):
            self._line(self._paint("red", f"error ({event.kind}): {event.message}"))
        elif isinstance(event, TurnFinished):
            self._end_stream()
            self._line(
                self._paint("bold", f"[{event.reason}] ")
                + one_line(event.summary, 400)
                + f"  ({event.steps} steps, {event.prompt_tokens + event.completion_tokens} tokens, "
                f"${event.cost_usd:.4f})"
            )
        self.out.flush()

    def _show(self, upto: int) -> None:
        if upto > self._shown:
            self.out.write(self._reply[self._shown : upto])
            self._shown = upto
            self._streaming = True

    def _end_stream(self) -> None:
        if self._streaming:
            self.out.write("\n")
            self._streaming = False

    def _line(self, text: str) -> None:
        self._end_stream()
        self.out.write(text + "\n")

    def _paint(self, style: str, text: str) -> str:
        if not self.color:
            return text
        codes = {"dim": "2", "green": "32", "red": "31", "cyan": "36", "yellow": "33", "bold": "1"}
        return f"\x1b[{codes[style]}m{text}\x1b[0m"


def _first_line(text: str) -> str:
    return one_line(text.splitlines()[0] if text else "", 200)


def _preview(text: str, lines: int = PREVIEW_LINES) -> str:
    shown = text.splitlines()
    body = "\n".join("    " + line for line in shown[:lines])
    return body.lstrip() + (f"\n    [... {len(shown) - lines} more lines]" if len(shown) > lines else "")
