"""Exporters: pure functions from a Pair to training records (none when the pair does not fit).

Every record names its format and version: `"format": "teachback-<kind>-<version>"`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from feedback_store.rows import Pair

Message = dict[str, Any]


@dataclass(frozen=True)
class Format:
    kind: str
    version: int
    build: Callable[[Pair], dict[str, Any] | None]
    parquet: bool = False

    @property
    def name(self) -> str:
        return f"teachback-{self.kind}-{self.version}"


@cache
def _hindsight_template() -> Template:
    return Template(resources.files("feedback_store").joinpath("hindsight.txt").read_text(encoding="utf-8"))


def render_message(message: Message | None) -> str:
    """An assistant message as plain text: its content, then one line per tool call."""
    if message is None:
        return ""
    lines = [message["content"]] if message.get("content") else []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        lines.append(f"{function.get('name')}({function.get('arguments', '')})")
    return "\n".join(lines)


def hindsight(pair: Pair) -> str:
    """What the teacher knows that the student did not: the attempt, its feedback, and the fix."""
    correction = ""
    if pair.correction is not None:
        correction = f"\nA reply that worked afterwards:\n\n{render_message(pair.correction)}\n"
    return _hindsight_template().substitute(
        attempt=render_message(pair.completion), feedback=pair.feedback, correction=correction
    )


def _ids(pair: Pair) -> dict[str, Any]:
    return {
        "id": pair.id,
        "session_id": pair.session_id,
        "source": pair.source,
        "tool": pair.tool,
        "error_kind": pair.error_kind,
        "model": pair.model,
        "created_at": pair.created_at,
        "corrected_at": pair.corrected_at,
    }


def sdpo(pair: Pair) -> dict[str, Any]:
    teacher = [*pair.prompt, {"role": "user", "content": hindsight(pair)}]
    return {
        "format": FORMATS["sdpo"].name,
        **_ids(pair),
        "prompt": pair.prompt,
        "tools": pair.tools,
        "completion": pair.completion,
        "feedback": pair.feedback,
        "correction": pair.correction,
        "teacher_prompt": teacher,
    }


def trl_sdpo(pair: Pair) -> dict[str, Any]:
    # TRL's experimental SDPOTrainer reads `prompt` and, for reprompting the teacher, `privileged_context`.
    return {"format": FORMATS["trl-sdpo"].name, "id": pair.id, "prompt": pair.prompt,
            "privileged_context": hindsight(pair)}


def trl_sdft(pair: Pair) -> dict[str, Any] | None:
    # TRL's experimental SDFTTrainer reads `prompt` and `privileged_context` (a demonstration).
    if pair.correction is None:
        return None
    context = f"Example response: {render_message(pair.correction)}\n\nWhy an earlier reply failed: {pair.feedback}"
    return {"format": FORMATS["trl-sdft"].name, "id": pair.id, "prompt": pair.prompt, "privileged_context": context}


def dpo(pair: Pair) -> dict[str, Any] | None:
    if pair.correction is None:
        return None
    return {"format": FORMATS["dpo"].name, "id": pair.id, "prompt": pair.prompt,
            "chosen": [pair.correction], "rejected": [pair.completion]}


def sft(pair: Pair) -> dict[str, Any] | None:
    if pair.correction is None:
        return None
    return {"format": FORMATS["sft"].name, "id": pair.id, "messages": [*pair.prompt, pair.correction],
            "tools": pair.tools}


def verl(pair: Pair) -> dict[str, Any]:
    """A verl RL row. Nested values that vary in shape are JSON text so the parquet schema is fixed."""
    return {
        "format": FORMATS["verl"].name,
        "data_source": f"teachback/{pair.source}",
        "prompt": [_flat_message(m) for m in pair.prompt],
        "ability": "coding",
        "reward_model": {"style": "rule", "ground_truth": render_message(pair.correction)},
        "extra_info": {
            **{k: v for k, v in _ids(pair).items() if k not in ("created_at", "corrected_at")},
            "feedback": pair.feedback,
            "privileged_context": hindsight(pair),
            "completion": json.dumps(pair.completion, ensure_ascii=False),
            "correction": None if pair.correction is None else json.dumps(pair.correction, ensure_ascii=False),
            "tools": json.dumps(pair.tools, ensure_ascii=False),
            "created_at": pair.created_at,
        },
    }


def _flat_message(message: Message) -> Message:
    calls = message.get("tool_calls") or None
    content = message.get("content")
    if content is None:
        content = ""
    elif not isinstance(content, str):  # content parts (multimodal): kept as JSON text
        content = json.dumps(content, ensure_ascii=False)
    return {
        "role": message.get("role") or "",
        "content": content,
        "tool_calls": None if calls is None else [
            {"id": c.get("id") or "", "type": c.get("type") or "function",
             "function": {"name": (c.get("function") or {}).get("name") or "",
                          "arguments": (c.get("function") or {}).get("arguments") or ""}}
            for c in calls
        ],
        "tool_call_id": message.get("tool_call_id"),
    }


FORMATS: dict[str, Format] = {
    "sdpo": Format("sdpo", 1, sdpo),
    "trl-sdpo": Format("trl-sdpo", 1, trl_sdpo),
    "trl-sdft": Format("trl-sdft", 1, trl_sdft),
    "dpo": Format("dpo", 1, dpo),
    "sft": Format("sft", 1, sft),
    "verl": Format("verl", 1, verl, parquet=True),
}
