"""Rendering ranked definitions as text that fits a token budget.

The map groups definitions by file, files in the order their best definition ranks, definitions
in source order, each with its line number and the headers of its enclosing scopes:

    todo/models.py:
     9│class TaskStore:
    22│    def add(self, title: str, priority: int = DEFAULT_PRIORITY) -> Task:
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from agent.repomap.tags import FileTags

_TOKEN = re.compile(r"[A-Za-z]{1,8}|\d{1,3}|[^\sA-Za-z\d]")
# Stop looking for smaller definitions that still fit after this many in a row did not.
MAX_MISSES = 50


def estimate_tokens(text: str) -> int:
    """A cheap, deterministic estimate of a BPE tokenizer's count for code.

    One token per run of up to 8 letters, up to 3 digits, or any other non-space character, plus
    one per line break. It is additive over lines, which lets the map fit its budget exactly.
    """
    return len(_TOKEN.findall(text)) + text.count("\n")


def render_map(ranked: Iterable[tuple[str, int]], tags: Mapping[str, FileTags], budget: int) -> str:
    """The best-ranked definitions (with their scopes) whose lines fit in `budget` tokens."""
    shown: dict[str, set[int]] = {}  # insertion order is the order files rank in
    used = 0
    misses = 0
    for path, index in ranked:
        if budget - used < 4:
            break
        entries = tags[path].entries
        in_file = shown.get(path)
        new: list[int] = []
        while index >= 0 and not (in_file and index in in_file):
            new.append(index)
            index = entries[index].parent
        if not new:
            continue  # already on the map as the scope of something better ranked
        cost = sum(_line_cost(entries[i].header, entries[i].line) for i in new)
        if in_file is None:
            cost += estimate_tokens(path + ":") + 1
        if used + cost > budget:
            misses += 1
            if misses > MAX_MISSES:
                break
            continue
        misses = 0
        used += cost
        shown.setdefault(path, set()).update(new)
    return "".join(_render_file(path, tags[path], sorted(indices)) for path, indices in shown.items())


def _line_cost(header: str, line: int) -> int:
    return estimate_tokens(header) + estimate_tokens(str(line + 1)) + 2  # "│" and the line break


def _render_file(path: str, tags: FileTags, indices: list[int]) -> str:
    width = len(str(max(tags.entries[i].line for i in indices) + 1))
    lines = [f"{path}:"]
    lines += [f"{tags.entries[i].line + 1:>{width}}│{tags.entries[i].header}" for i in indices]
    return "\n".join(lines) + "\n"
