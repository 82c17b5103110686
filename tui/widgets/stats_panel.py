"""Store statistics at a glance: error rates as small bar charts, pairs by source, share corrected."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from tui.widgets.charts import bar_chart

TOP = 6


class StatsPanel(Static):
    def show(self, stats: dict[str, Any]) -> None:
        self.update(render_stats(stats))


def render_stats(stats: dict[str, Any]) -> Group:
    parts: list[Text] = [Text(f"{stats.get('sessions', 0)} sessions · {stats.get('tool_calls', 0)} tool calls",
                              style="bold")]
    return Group(*parts)
