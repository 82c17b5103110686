"""One line of session state: model, step, tokens, cost, approval mode, and what is happening."""

from __future__ import annotations

from pathlib import PurePath

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget


class StatusBar(Widget):
    model: reactive[str] = reactive("")
    approval: reactive[str] = reactive("")
    state: reactive[str] = reactive("starting")
    step: reactive[int] = reactive(0)
    tokens: reactive[int] = reactive(0)
    cost: reactive[float] = reactive(0.0)

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f" {self.state} ", style="reverse")
        text.append(f" {display_model(self.model)}", style="bold")
        text.append(f" · step {self.step} · {compact(self.tokens)} tok · ${self.cost:.4f}")
        text.append(f" · approval {self.approval}")
        return text

    def add_usage(self, step: int, tokens: int, cost: float) -> None:
        self.step = step
        self.tokens += tokens
        self.cost += cost


def compact(count: int) -> str:
    """1234 -> 1.2k, 2500000 -> 2.5M."""
    for limit, suffix in ((1_000_000, "M"), (1_000, "k")):
        if count >= limit:
            return f"{count / limit:.1f}{suffix}"
    return str(count)


def display_model(model: str) -> str:
    """A model string short enough for a status line: a file-backed model shows its file name."""
    provider, _, rest = model.partition("/")
    if rest and PurePath(rest).is_absolute():
        return f"{provider}/{PurePath(rest).name}"
    return model
