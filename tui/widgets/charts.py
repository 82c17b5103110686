"""Tiny horizontal bar charts for rates and counts, drawn with block characters."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text

EIGHTHS = " ▏▎▍▌▋▊▉█"


def bar(fraction: float, width: int) -> str:
    fraction = max(0.0, min(1.0, fraction))
    eighths = round(fraction * width * 8)
    full, rest = divmod(eighths, 8)
    return ("█" * full + (EIGHTHS[rest] if rest else "")).ljust(width)


def bar_chart(
    rows: Iterable[tuple[str, float, str]], *, label_width: int = 14, bar_width: int = 20, style: str = "red"
) -> Text:
    """One line per (label, fraction of the bar, value text)."""
    text = Text()
    for label, fraction, value in rows:
        text.append(label[:label_width].ljust(label_width) + " ")
        text.append(bar(fraction, bar_width), style=style)
        text.append(f" {value}\n")
    text.rstrip()
    return text
