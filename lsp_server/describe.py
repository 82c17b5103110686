"""Events in words: progress messages and log lines for editors that show plain text only."""

from __future__ import annotations

from lsprotocol import types

from agent.protocol import (
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    EditApplied,
    EditReviewed,
    ErrorEvent,
    Event,
    LessonsShown,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)
from common.text import clip, first_line

SNIPPET = 200
TARGET_CHARS = 60


def progress_message(event: Event) -> str | None:
    """What the turn is doing now, for `$/progress` (None: no change worth showing)."""
    if isinstance(event, TurnStarted):
        return "asking the model"
    if isinstance(event, ToolCallStarted):
        target = clip(event.target or "", TARGET_CHARS)
        return f"step {event.step}: {event.name or 'reply'}{' ' + target if target else ''}"
    if isinstance(event, ToolCallFinished) and not event.ok:
        return f"step {event.step}: {event.name or 'reply'} failed ({_problem(event)}), the model will retry"
    if isinstance(event, AssistantMessage):
        return f"step {event.step}: the model replied"
    if isinstance(event, ApprovalRequested):
        return f"waiting for your approval: {event.summary}"
    return None


def log_line(event: Event) -> tuple[str, types.MessageType] | None:
    """One line for `window/logMessage` (None for events not worth a line, such as stream deltas)."""
    info, warning, error = types.MessageType.Info, types.MessageType.Warning, types.MessageType.Error
    if isinstance(event, TurnStarted):
        return f"[turn {event.turn}] {event.text}", info
    if isinstance(event, AssistantMessage):
        content = (event.message.get("content") or "").strip()
        return (f"[assistant] {content}", info) if content else None
    if isinstance(event, ToolCallFinished):
        target = f" {event.target}" if event.target else ""
        if event.ok:
            return f"[tool] {event.name}{target}: ok", info
        return f"[tool] {event.name}{target} failed ({_problem(event)}): {first_line(event.result, SNIPPET)}", warning
    if isinstance(event, EditApplied):
        where = f"{event.path} -> {event.new_path}" if event.new_path else event.path
        broken = f"; it no longer parses: {event.syntax_error}" if event.syntax_error else ""
        return f"[edit {event.edit_id}] {event.kind} {where}{broken}", warning if broken else info
    if isinstance(event, ApprovalRequested):
        return (
            f"[approval {event.request_id}] {event.summary}\n{event.detail}\n"
            f"Answer in the prompt, or run teachback.accept / teachback.reject with id {event.request_id}."
        ), info
    if isinstance(event, ApprovalResolved):
        verdict = "approved" if event.approved else "declined"
        return f"[approval {event.request_id}] {verdict}{': ' + event.comment if event.comment else ''}", info
    if isinstance(event, EditReviewed):
        return f"[review] {event.path}: {event.decision}{': ' + event.comment if event.comment else ''}", info
    if isinstance(event, TurnFinished):
        cost = f", ${event.cost_usd:.4f}" if event.cost_usd else ""
        return f"[turn {event.turn}] {event.reason} after {event.steps} step(s){cost}: {event.summary}", info
    if isinstance(event, ErrorEvent):
        return f"[error] {event.message}", error
    if isinstance(event, LessonsShown):
        where = "at session start" if event.moment == "session_start" else f"after the failed call {event.call_id}"
        shown = "".join(f"\n- [{lesson['id']}] {lesson['text']}" for lesson in event.lessons)
        return f"[lessons] {len(event.lessons)} shown to the model {where}:{shown}", info
    return None


def _problem(event: ToolCallFinished) -> str | None:
    return f"exit code {event.exit_code}" if event.exit_code is not None else event.error_kind
