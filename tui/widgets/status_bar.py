"""One line of session state: model, step, tokens, cost, approval mode, and what is happening.

While a turn runs the line shows how long it has been running and its phase, each known from the
session's events: the session is starting the turn (its first builds the system prompt and starts MCP
servers), the model is reading the prompt (loading it first, on a model's first call in this app) or
generating its reply, a tool is running, or the user's approval is awaited.
"""

from __future__ import annotations

import time
from pathlib import PurePath

from rich.text import Text
from textual.reactive import reactive
from textual.timer import Timer
from textual.widget import Widget

from agent.protocol import (
    ApprovalRequested,
    ApprovalResolved,
    AssistantMessage,
    Event,
    ModelUsage,
    ToolCallFinished,
    ToolCallStarted,
    TurnStarted,
)

STARTING = "starting the turn"
LOADING = "loading the model, reading the prompt"
READING = "reading the prompt"
GENERATING = "generating"
APPROVAL = "waiting for your approval"


class StatusBar(Widget):
    model: reactive[str] = reactive("")
    approval: reactive[str] = reactive("")
    state: reactive[str] = reactive("starting")
    step: reactive[int] = reactive(0)
    tokens: reactive[int] = reactive(0)
    cost: reactive[float] = reactive(0.0)
    phase: reactive[str] = reactive("")  # what the running turn is doing; "" between turns
    generated: reactive[int] = reactive(0)  # characters of the reply being generated

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._turn_started: float | None = None  # time.monotonic() when the running turn was sent
        self._answered: set[str] = set()  # the models that have answered in this app: they are loaded
        self._ticker: Timer | None = None
        self._tool = ""  # the call running (or awaiting approval)

    def on_mount(self) -> None:
        self._ticker = self.set_interval(1.0, self.refresh, pause=True)

    def render(self) -> Text:
        text = Text(no_wrap=True, overflow="ellipsis")
        if self._turn_started is None:
            text.append(f" {self.state} ", style="reverse")
        else:
            text.append(f" {self.state} {clock(time.monotonic() - self._turn_started)} ", style="reverse")
            text.append(f" {self.phase}", style="italic")
            if self.phase == GENERATING:
                text.append(f" ({self.generated} chars)", style="italic")
            text.append(" ·")
        text.append(f" {display_model(self.model)}", style="bold")
        text.append(f" · step {self.step} · {compact(self.tokens)} tok · ${self.cost:.4f}")
        text.append(f" · approval {self.approval}")
        return text

    def add_usage(self, step: int, tokens: int, cost: float) -> None:
        self.step = step
        self.tokens += tokens
        self.cost += cost

    def start_turn(self) -> None:
        """The user sent an instruction: the clock starts."""
        self._turn_started = time.monotonic()
        self.state, self.phase = "running", STARTING
        if self._ticker is not None:
            self._ticker.resume()

    def end_turn(self) -> None:
        self._turn_started = None
        self.state, self.phase = "ready", ""
        if self._ticker is not None:
            self._ticker.pause()

    def follow(self, event: Event) -> None:
        """The phase the session's `event` starts."""
        if isinstance(event, ModelUsage):
            self._answered.add(event.model)
        if isinstance(event, (TurnStarted, ToolCallFinished)):
            # the next step asks the model, or runs the reply's next call (whose start follows at once)
            self.phase = READING if self.model in self._answered else LOADING
        elif isinstance(event, AssistantMessage):
            self.generated = 0
        elif isinstance(event, ToolCallStarted):
            self._tool = event.name
            self.phase = f"running {event.name}"
        elif isinstance(event, ApprovalRequested):
            self.phase = APPROVAL
        elif isinstance(event, ApprovalResolved):  # an approved call runs now; a denied one finishes at once
            self.phase = f"running {self._tool}"

    def streamed(self, text: str) -> None:
        """Reply text arrived from the model."""
        self.phase = GENERATING
        self.generated += len(text)


def clock(seconds: float) -> str:
    """65.2 -> 1:05."""
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}:{seconds:02d}"


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
