"""Shortening text for a line of a terminal, an editor or a message: what the model or a workspace
sent may be megabytes, so everything shown is cut here."""

from __future__ import annotations

ELLIPSIS = "…"


def clip(text: str, limit: int, mark: str = ELLIPSIS) -> str:
    """`text` cut to at most `limit` characters, `mark` ending a cut one."""
    return text if len(text) <= limit else text[: limit - len(mark)] + mark


def one_line(text: str | None, limit: int) -> str:
    """`text` with its whitespace runs (newlines included) made single spaces, then clipped."""
    return clip(" ".join((text or "").split()), limit)


def first_line(text: str, limit: int) -> str:
    """The first non-blank line of `text`, clipped."""
    stripped = text.strip()
    return clip(stripped.splitlines()[0] if stripped else "", limit)
