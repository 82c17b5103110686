"""No-tool probes: states where the right reply is to answer without acting.

Fine-tuning a small model on tool rows is known to teach over-calling. A probe is a held-out
session's first state (its system prompt and tools, as recorded) with the task's instruction
replaced by a question that needs no tool and no change to any file (`no_tool_probes.txt`,
picked per session by a hash of its id). A reply that calls any tool but `finish` is `over_call`;
`finish` or an answer without a call is right (in the grammar tool mode every reply is a call, so
`finish` is the only way to answer).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from functools import cache
from importlib import resources
from typing import Any

from tasks.states import ANSWER, FINISHED, Label, State

OVER_CALL = "over_call"


@cache
def questions(name: str = "no_tool_probes.txt") -> tuple[str, ...]:
    """The held-out no-tool questions, or (`no_tool_training.txt`) the disjoint ones training may use."""
    text = resources.files("tasks").joinpath(name).read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


TRAINING_QUESTIONS = "no_tool_training.txt"


def build_probes(states: list[State], questions_file: str = "no_tool_probes.txt") -> list[State]:
    """One probe per session, from its first state, in the order the sessions come (held-out
    questions; training's own with `questions_file=TRAINING_QUESTIONS`)."""
    asked = questions(questions_file)
    probes, seen = [], set()
    for state in states:
        if state.session_id in seen:
            continue
        seen.add(state.session_id)
        users = [i for i, m in enumerate(state.messages) if m.get("role") == "user"]
        if not users:
            continue
        pick = int.from_bytes(hashlib.sha256(state.session_id.encode()).digest()[:4], "big") % len(asked)
        messages = list(state.messages[: users[0]]) + [{"role": "user", "content": asked[pick]}]
        probes.append(replace(state, messages=messages, step=-1, calls=[], edits=[], turn_calls=[], edit_count=0))
    return probes


def probe_label(reply: Any) -> Label:
    """over_call when the reply calls a tool other than finish; else finished or answer."""
    tools = tuple(call["function"]["name"] for call in reply.tool_calls)
    if reply.format_error:
        return Label("malformed_call", tools)
    if any(tool != "finish" for tool in tools):
        return Label(OVER_CALL, tools)
    return Label(FINISHED if tools else ANSWER, tools)
