"""What of a session's text leaves the machine with its spans (otel/spans.py): messages, arguments
and results only when the user opted in, everything redacted as exports are; with content off, the
argument values a feedback text quotes are masked."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

MASK = "[argument]"
MASK_MIN_LENGTH = 4  # shorter argument values (a flag, a count) are words of the feedback too


class Scrub(Protocol):
    """A Redactor, or the exports' Unrooted wrapper around one."""

    def redact(self, text: str) -> str: ...


@dataclass(frozen=True)
class Content:
    """What leaves the machine: messages and arguments only when `on`, everything through `scrub`."""

    on: bool = False
    scrub: Scrub | None = None

    def text(self, text: str) -> str:
        return self.scrub.redact(text) if self.scrub is not None else text

    def json(self, value: Any) -> str:
        return self.text(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


def mask(text: str, arguments: Any) -> str:
    """`text` with every string among `arguments` (a call's arguments, parsed or raw), and every
    long line of one, replaced by MASK."""
    values = sorted(set(_strings(arguments)), key=len, reverse=True)
    for value in values:
        text = text.replace(value, MASK)
    return text


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        if len(value.strip()) >= MASK_MIN_LENGTH:
            yield value
            for line in value.splitlines():
                if len(line.strip()) >= 2 * MASK_MIN_LENGTH:
                    yield line.strip()
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def message_parts(message: Any, role: str) -> dict[str, Any]:
    """A conversation message in the GenAI conventions' message shape (role and parts)."""
    message = message if isinstance(message, dict) else {}
    parts: list[dict[str, Any]] = []
    if message.get("content"):
        parts.append({"type": "text", "content": message["content"]})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": function.get("name"),
                "arguments": function.get("arguments"),
            }
        )
    return {"role": message.get("role") or role, "parts": parts}
