"""A progress bar on stderr for long work (a repository scan, task validation, training), drawn
with rich, which is imported on the first update: work that turns out to need none pays nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Update = Callable[..., None]  # update(done, total, **fields named in the bar's detail)


@contextmanager
def progress_bar(label: str, *, quiet_below: int = 0, detail: str = "") -> Iterator[Update]:
    """An update callback drawing a bar labelled `label`. Below `quiet_below` items the work is
    quick, so no bar unless stderr is a terminal. `detail` formats the fields each update passes
    ("loss {loss}"). On a terminal the bar disappears when done; in a log its final state stays."""
    console: Any = None
    bar: Any = None
    task: Any = None

    def update(done: int, total: int | None, **fields: Any) -> None:
        nonlocal console, bar, task
        if bar is None:
            from rich.console import Console

            console = console or Console(stderr=True)
            if (total or 0) < quiet_below and not console.is_terminal:
                return
            bar = _bar(console, detail)
            bar.start()
            task = bar.add_task(label, total=total, **fields)
        bar.update(task, completed=done, total=total, **fields)

    try:
        yield update
    finally:
        if bar is not None:
            bar.stop()


def _bar(console: Any, detail: str) -> Any:
    from rich.progress import MofNCompleteColumn, Progress, TextColumn

    columns = list(Progress.get_default_columns())  # label, bar, percentage, time left
    if detail:  # the count and the fields, before the time left
        columns[-1:-1] = [MofNCompleteColumn(), TextColumn(detail.replace("{", "{task.fields[").replace("}", "]}"))]
    return Progress(*columns, console=console, transient=console.is_terminal)
