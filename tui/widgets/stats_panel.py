"""Store statistics at a glance: failures first (call errors and premature finishes together, as
`teachback stats` leads with them), call-error rates as small bar charts, pairs by source, share
corrected."""

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
        Text(
            f"failures: {stats['failures']}"
            + (f" ({stats['failure_rate']:.0%} of model calls)" if stats["model_calls"] else ""),
            style="bold",
        ),
        Text(f"call errors: {stats['call_error_rate']:.0%} of calls"),
        Text(f"{stats['failing_test_runs']} failing test runs", style="dim"),
    ]
    if stats["graded_sessions"]:
        parts.append(
            Text(f"{stats['premature_finishes']} of {stats['graded_sessions']} tasks finished early", style="dim")
        )
    by_tool = sorted(stats["call_error_rate_by_tool"].items(), key=lambda item: (-item[1]["call_error_rate"], item[0]))
    if by_tool:
        parts.append(_heading("Call-error rate by tool"))
        parts.append(
            bar_chart(
                ((name, e["call_error_rate"], f"{e['call_error_rate']:.0%}") for name, e in by_tool[:TOP]),
                label_width=LABEL,
                bar_width=BAR,
            )
        )
    by_kind = sorted(stats["call_errors_by_kind"].items(), key=lambda item: (-item[1]["count"], item[0]))
    if by_kind:
        most = by_kind[0][1]["count"]
        parts.append(_heading("Call errors by kind"))
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
