"""Store statistics at a glance: error rates as small bar charts, pairs by source, share corrected."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from tui.widgets.charts import bar_chart

TOP = 5
LABEL = 11
BAR = 10


class StatsPanel(Static):
    def show(self, stats: dict[str, Any]) -> None:
        self.update(render_stats(stats))


def render_stats(stats: dict[str, Any]) -> Group:
    parts = [
        Text(f"{stats['sessions']} sessions · {stats['tool_calls']} calls", style="bold"),
        Text(f"{stats['error_rate']:.0%} of tool calls failed"),
    ]
    by_tool = sorted(stats["error_rate_by_tool"].items(), key=lambda item: (-item[1]["error_rate"], item[0]))
    if by_tool:
        parts.append(_heading("Error rate by tool"))
        parts.append(
            bar_chart(
                ((name, e["error_rate"], f"{e['error_rate']:.0%}") for name, e in by_tool[:TOP]),
                label_width=LABEL,
                bar_width=BAR,
            )
        )
    by_kind = sorted(stats["errors_by_kind"].items(), key=lambda item: (-item[1]["count"], item[0]))
    if by_kind:
        most = by_kind[0][1]["count"]
        parts.append(_heading("Errors by kind"))
        parts.append(
            bar_chart(
                ((kind, e["count"] / most, str(e["count"])) for kind, e in by_kind[:TOP]),
                label_width=LABEL,
                bar_width=BAR,
                style="yellow",
            )
        )
    parts.append(_heading(f"Pairs: {stats['pairs']}"))
    if stats["pairs"]:
        parts.append(
            bar_chart(
                [("corrected", stats["share_corrected"], f"{stats['share_corrected']:.0%}")],
                label_width=LABEL,
                bar_width=BAR,
                style="green",
            )
        )
        parts.append(Text(" · ".join(f"{source} {n}" for source, n in stats["pairs_by_source"].items()), style="dim"))
    return Group(*parts)


def _heading(text: str) -> Text:
    return Text(f"\n{text}", style="bold")
