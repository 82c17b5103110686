"""Record lengths in tokens, for `--max-tokens` and the length report.

Counted with a real tokenizer (the caller's: the command line passes the embedded model's, or any
GGUF file's) or estimated at 4 characters per token, and the report says which. Each message is
counted on its own, once per session. A record's text is what a trainer tokenizes: each message's content and tool calls (plus
PER_MESSAGE tokens of chat-template markup, an approximation), the `tools` column, the longest of
its completions and the privileged context.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Protocol

from common.jsontext import dumps_unicode as _dumps
from feedback_store.errors import StoreError
from feedback_store.export.views import Memo

CHARS_PER_TOKEN = 4
PER_MESSAGE = 4  # ChatML's <|im_start|>role\n ... <|im_end|>\n
COMPLETIONS = ("completion", "chosen", "rejected")


class TokenCounter(Protocol):
    """How a record's text is counted: `name` says how, for the length report. The command line
    passes a real tokenizer's (the embedded model's, or any GGUF file's, built where the model
    providers live); without one, `Estimate` is used."""

    name: str

    def count(self, text: str) -> int: ...


class Estimate:
    name = f"estimated at {CHARS_PER_TOKEN} characters per token"

    def count(self, text: str) -> int:
        return -(-len(text) // CHARS_PER_TOKEN)


def counter_of(tokenizer: TokenCounter | str | None) -> TokenCounter:
    """`tokenizer` as given to export(): a counter, or None / "estimate" for the estimate."""
    if tokenizer is None or tokenizer == "estimate":
        return Estimate()
    if isinstance(tokenizer, str):
        raise StoreError(
            f"tokenizer {tokenizer!r}: export() takes a token counter or 'estimate'; "
            "`teachback export --tokenizer` builds one from local/<name> or a .gguf path."
        )
    return tokenizer


def message_tokens(message: dict[str, Any], counter: TokenCounter) -> int:
    text = f"{message.get('role', '')}\n{message.get('content') or ''}"
    if message.get("tool_calls"):
        text += "\n" + _dumps(message["tool_calls"])
    return counter.count(text) + PER_MESSAGE


def _messages_tokens(messages: Any, counter: TokenCounter, memo: Memo, kind: str) -> int:
    def count(m: dict[str, Any]) -> int:
        return message_tokens(m, counter)

    if isinstance(messages, dict):
        return memo.get(messages, count)
    if not isinstance(messages, list):
        return 0
    if all(isinstance(m, dict) for m in messages):
        return sum(memo.each(messages, count, kind))
    return sum([memo.get(m, count) for m in messages if isinstance(m, dict)])


def record_tokens(record: dict[str, Any], counter: TokenCounter, memo: Memo | None = None) -> tuple[int, int]:
    """(prompt tokens, total tokens) of one record; `memo` counts a message shared by several
    records once."""
    memo = memo or Memo()
    prompt = _messages_tokens(record.get("prompt"), counter, memo, "prompt")
    tools = record.get("tools")
    if isinstance(tools, str):
        prompt += counter.count(tools)
    elif tools:  # a session's records share its schema list: counted once
        prompt += memo.get(tools, lambda t: counter.count(_dumps(t)))
    longest = max((_messages_tokens(record.get(key), counter, memo, key) for key in COMPLETIONS), default=0)
    context = record.get("privileged_context")
    return prompt, prompt + longest + (counter.count(context) if isinstance(context, str) else 0)


@dataclass
class LengthReport:
    tokenizer: str
    max_tokens: int | None = None
    prompts: list[int] = field(default_factory=list)
    totals: list[int] = field(default_factory=list)
    over: int = 0  # records left out for exceeding max_tokens

    def admit(self, record: dict[str, Any], counter: TokenCounter, memo: Memo | None = None) -> bool:
        prompt, total = record_tokens(record, counter, memo)
        if self.max_tokens is not None and total > self.max_tokens:
            self.over += 1
            return False
        self.prompts.append(prompt)
        self.totals.append(total)
        return True

    def summary(self) -> dict[str, Any]:
        return {
            "tokenizer": self.tokenizer,
            "max_tokens": self.max_tokens,
            "left_out_over_max": self.over,
            "prompt": _spread(self.prompts),
            "total": _spread(self.totals),
        }

    def lines(self) -> list[str]:
        s = self.summary()
        out = [f"Lengths ({self.tokenizer}):"]
        for name in ("prompt", "total"):
            d = s[name]
            if d:
                out.append(f"  {name:<6} min {d['min']}, median {d['median']}, p90 {d['p90']}, max {d['max']} tokens")
        if self.max_tokens is not None:
            out.append(f"  {self.over} records over --max-tokens {self.max_tokens} left out")
        return out


def _spread(values: list[int]) -> dict[str, int]:
    if not values:
        return {}
    ordered = sorted(values)
    return {
        "min": ordered[0],
        "median": int(statistics.median(ordered)),
        "p90": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))],
        "max": ordered[-1],
    }
