"""Two ways a reply of the embedded model ends before its token cap: it went round in a loop (a
small model can repeat one sentence until any cap), or the caller gave up while llama.cpp was still
reading the prompt (one batch of a long prompt takes seconds on two cores, and Ctrl-C must not wait
for it)."""

from __future__ import annotations

import logging
import threading
from typing import Any

_LLAMA_LOG = logging.getLogger("llama-cpp-python")  # where llama-cpp-python sends llama.cpp's log
LOOP_PERIOD = 64  # tokens in the longest unit (a sentence, a line) watched for repeats
LOOP_REPEATS = 4  # the unit written this many times in a row is a loop ...
LOOP_SPAN = 32  # ... once the repeats cover this many tokens (a token repeated 32 times, a 16-token line 4 times)


class RepetitionGuard:
    """Watches the sampled tokens for a loop: the last tokens being one unit of up to LOOP_PERIOD
    tokens written LOOP_REPEATS times in a row and covering LOOP_SPAN tokens. For each period p it
    keeps how many of the latest tokens equal the token p before them, so a token costs LOOP_PERIOD
    comparisons."""

    def __init__(self, period: int = LOOP_PERIOD, repeats: int = LOOP_REPEATS, span: int = LOOP_SPAN) -> None:
        self.period, self.repeats, self.span = period, repeats, span
        self._tokens: list[int] = []
        self._runs = [0] * (period + 1)  # _runs[p]: the latest tokens each equal to the one p before

    def add(self, token: int) -> bool:
        """Take the next sampled token; True once the reply is looping."""
        tokens, runs = self._tokens, self._runs
        tokens.append(token)
        looping = False
        for p in range(1, min(self.period, len(tokens) - 1) + 1):
            runs[p] = runs[p] + 1 if tokens[-1] == tokens[-1 - p] else 0
            if runs[p] >= p * (self.repeats - 1) and runs[p] + p >= self.span:
                looping = True
        return looping


class PromptAbort:
    """While active, llama.cpp's decode of `ctx` stops within a graph node once `cancel` is set (it
    then fails with return code 2). Active only while the prompt is read: the callback crosses into
    Python at every node, a cost worth paying for a multi-second prompt batch but not for each
    sampled token, where the sampling loop checks `cancel` itself."""

    def __init__(self, ctx: Any, cancel: threading.Event | None) -> None:
        self._ctx = ctx
        self._callback: Any = None
        self._level: int | None = None  # llama.cpp's log level before an abort quietened it
        if cancel is not None:
            from llama_cpp import ggml_abort_callback

            self._callback = ggml_abort_callback(lambda _data: self._aborting(cancel))

    def _aborting(self, cancel: threading.Event) -> bool:
        if not cancel.is_set():
            return False
        if self._level is None:  # llama.cpp logs the abort as an error; the caller asked for it
            self._level = _LLAMA_LOG.level
            _LLAMA_LOG.setLevel(logging.CRITICAL + 1)
        return True

    def start(self) -> None:
        if self._callback is not None:
            from llama_cpp import llama_set_abort_callback

            llama_set_abort_callback(self._ctx, self._callback, None)

    def stop(self) -> None:
        """Remove the callback: llama.cpp must never call it after this object is gone."""
        if self._callback is not None:
            from llama_cpp import ggml_abort_callback, llama_set_abort_callback

            llama_set_abort_callback(self._ctx, ggml_abort_callback(), None)
            self._callback = None
        if self._level is not None:
            _LLAMA_LOG.setLevel(self._level)
            self._level = None
