"""Plain-text helpers shared by the screens: times, one-line summaries, message rendering."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from agent.protocol.arguments import value_or_text


def format_time(value: Any) -> str:
    """A timestamp (epoch seconds, datetime or ISO text) as local `YYYY-MM-DD HH:MM`."""
    if value is None or value == "":
        return ""
    if isinstance(value, (int, float)):
        value = datetime.fromtimestamp(value)
    elif isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone()
        return value.strftime("%Y-%m-%d %H:%M")
    return str(value)


def message_text(message: dict[str, Any] | None) -> str:
    """A conversation message as readable text: its content, then any tool calls it makes."""
    if not message:
        return ""
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    parts = [content] if content else []
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        parts.append(f"→ {function.get('name', '?')}({pretty_json(function.get('arguments', ''))})")
    return "\n".join(parts)


def pretty_json(text: str) -> str:
    """JSON text indented for reading; anything unparseable (or past the agent's bounds for a
    model's text) comes back exactly as given."""
    if not isinstance(text, str):
        return str(text)
    value = value_or_text(text)
    return text if value is text else json.dumps(value, indent=1, ensure_ascii=False)
