"""Several processes doing one thing at the same moment, as parallel task attempts do."""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Callable
from typing import Any


def errors_at_once(work: Callable[..., None], *args: Any, processes: int = 4) -> list[str]:
    """Run `work(*args)` in `processes` forked processes released together by a barrier; return what each
    one that failed raised (empty: all succeeded)."""
    context = multiprocessing.get_context("fork")
    start, errors = context.Barrier(processes), context.Queue()

    def run() -> None:
        start.wait()
        try:
            work(*args)
        except Exception as exc:  # sent back to the test, which names it
            errors.put(f"{type(exc).__name__}: {exc}")
            errors.close()
            errors.join_thread()
            sys.exit(1)

    procs = [context.Process(target=run) for _ in range(processes)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    failed = [proc for proc in procs if proc.exitcode != 0]
    return [errors.get(timeout=5) if proc.exitcode == 1 else f"exit code {proc.exitcode}" for proc in failed]
