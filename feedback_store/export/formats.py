"""Exporters: pure functions from an Example (a pair, its fitting correction, what the model saw)
to training records. A builder returns its records, or Left(reason) when the pair has none in
that format.

Every record names its format and version: `"format": "teachback-<kind>-<version>"`. Which view of
the conversation a trainer format carries is the `template` option (see feedback_store.export.views):
`native` (OpenAI / Hugging Face tool calls, the tool schemas in a `tools` column as JSON text, which
TRL's SFT and DPO trainers pass to the chat template), `text` (tools in the system prompt, calls as
text: for models whose chat template has no tool support, such as SmolLM2), or `auto` (text for
sessions whose model was given the text form, native otherwise).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from agent.protocol import textcalls
from feedback_store.content.renders import Render
from feedback_store.export.corrections import Fit
from feedback_store.export.encoding import dumps
from feedback_store.export.format_table import FORMATS
from feedback_store.export.views import (
    Memo,
    canonical,
    canonical_message,
    compact_tools,
    fold_tool_results,
    text_reply,
    text_view,
    tool_names,
)
from feedback_store.rows import Pair

Message = dict[str, Any]
TEXT_MODES = ("text", "grammar", "json_object")
JSON_MODES = ("grammar", "json_object")  # the model writes a bare JSON call object


@dataclass(frozen=True)
class Options:
    template: str = "auto"  # auto | native | text
    compact_tools: bool = False


@dataclass(frozen=True)
class Example:
    pair: Pair
    fit: Fit = field(default_factory=lambda: Fit(None, "not derived"))
    render: Render | None = None  # the failed reply's model call, as the model saw it
    fix_ids: list[int] | None = None  # the token ids the model sampled for the fit, when it is a recorded reply
    options: Options = field(default_factory=Options)
    label: bool | None = None  # kto: a user's verdict on an edit that is not a failure (accepted)
    memo: Memo | None = field(default=None, compare=False)  # shared by the examples of one session
    provenance: dict[str, Any] | None = None  # feedback_store.team.provenance: added to each of its records


@dataclass(frozen=True)
class Left:
    reason: str


Built = list[dict[str, Any]] | Left


# ---------------------------------------------------------------------------------------------
# Views of one example


def tools_of(ex: Example) -> list[dict[str, Any]]:
    return compact_tools(ex.pair.tools) if ex.options.compact_tools else ex.pair.tools


def template_of(ex: Example) -> str:
    if ex.options.template != "auto":
        return ex.options.template
    return "text" if style_of(ex) in TEXT_MODES else "native"


def style_of(ex: Example) -> str:
    """How the session's model was asked for calls: native, text or grammar."""
    if ex.render is not None and ex.render.tool_mode:
        return ex.render.tool_mode
    return "grammar" if (ex.pair.model or "").startswith("local/") else "native"


def prompt_of(ex: Example) -> list[Message]:
    """The prompt in the example's view. The text view is the recorded render when there is one
    (exactly what the model was given: the stored tool schemas have lost their key order), else
    rendered now as teachback renders for a text-mode model."""
    if template_of(ex) == "text":
        if ex.render is not None and ex.render.messages is not None and not ex.options.compact_tools:
            return ex.render.messages
        return text_view(ex.pair.prompt, tools_of(ex))
    return canonical(ex.pair.prompt, ex.pair.tools, ex.memo)


def reply_of(ex: Example, message: Message) -> Message:
    if template_of(ex) == "text":
        return text_reply(message, "json" if style_of(ex) in JSON_MODES else "text", written_call(ex))
    return canonical_of(ex, message)


def canonical_of(ex: Example, message: Message) -> Message:
    return session_canonical(message, ex.pair.tools, ex.memo)


def session_canonical(message: Message, tools: list[dict[str, Any]], memo: Memo | None) -> Message:
    """One message in the canonical view, made once per session: a failed reply is also a later
    pair's prompt message, and a correction is often one too."""
    if memo is None:
        return canonical_message(message, tool_names(tools))
    return memo.get(message, lambda m: canonical_message(m, tool_names(tools)))


def written_call(ex: Example) -> str | None:
    """A call as the session's model wrote it, for writing a derived call the same way: the failed
    reply, else the latest earlier reply with a call."""
    names = tool_names(ex.pair.tools)
    for message in (ex.pair.completion, *reversed(ex.pair.prompt)):
        text = message.get("content") if message.get("role") == "assistant" else None
        if isinstance(text, str) and text and textcalls.parse_reply(text, names).tool_calls:
            return text
    return None


def chosen_text(ex: Example) -> str | None:
    """The fit as the model writes it in a text tool mode (its own text when it is a recorded reply)."""
    if ex.fit.message is None or style_of(ex) not in TEXT_MODES:
        return None
    return text_reply(ex.fit.message, "json" if style_of(ex) in JSON_MODES else "text", written_call(ex))["content"]


def tools_column(ex: Example) -> str | None:
    """The tool schemas as JSON text for the native view (TRL json-decodes it); None for the text
    view, whose system prompt already lists them."""
    return json.dumps(tools_of(ex), ensure_ascii=False) if template_of(ex) == "native" else None


def rendered(ex: Example) -> dict[str, Any] | None:
    """What the model was given for the failed reply and what it sampled, when that was recorded;
    and the fit as the model writes it, with the ids it sampled for it when it is a recorded reply
    (the failed reply's ids and the fit's both end before the end-of-turn token)."""
    r = ex.render
    if r is None or (r.messages is None and r.prompt_token_ids is None):
        return None
    return {
        "tool_mode": r.tool_mode,
        "messages": r.messages,
        "completion": ex.pair.completion.get("content") or "",
        "prompt_token_ids": r.prompt_token_ids,
        "completion_token_ids": r.completion_token_ids,
        "logprobs": r.logprobs,
        "chosen": chosen_text(ex),
        "chosen_token_ids": ex.fix_ids if r.completion_token_ids is not None else None,
    }


def _first_call(message: Message | None) -> dict[str, Any] | None:
    calls = (canonical_message(message, []) if message else {}).get("tool_calls") or []
    return {"name": calls[0]["function"]["name"], "arguments": calls[0]["function"]["arguments"]} if calls else None


def ground_truth(ex: Example) -> str:
    """What the reward function checks a sampled call against (feedback_store.rewards)."""
    tools = {t.get("function", t)["name"]: t.get("function", t).get("parameters") or {} for t in ex.pair.tools}
    return json.dumps(
        {
            "failed": _first_call(ex.pair.completion),
            "expected": _first_call(ex.fit.message),
            "feedback": ex.pair.feedback,
            "error_kind": ex.pair.error_kind,
            "tools": tools,
        },
        ensure_ascii=False,
        sort_keys=True,
    )


@cache
def _hindsight_template() -> Template:
    return Template(resources.files("feedback_store.export").joinpath("hindsight.txt").read_text(encoding="utf-8"))


def render_message(message: Message | None) -> str:
    """An assistant message as plain text: its content, then one line per tool call."""
    if message is None:
        return ""
    lines = [message["content"]] if message.get("content") else []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        text = arguments if isinstance(arguments, str) else dumps(arguments)
        lines.append(f"{function.get('name')}({text})")
    return "\n".join(lines)


def hindsight(pair: Pair, memo: Memo | None = None) -> str:
    """What the teacher knows that the student did not: the attempt, its feedback, and the fix."""
    correction = ""
    if pair.correction is not None:
        fix = render_message(session_canonical(pair.correction, pair.tools, memo))
        correction = f"\nA reply that worked afterwards:\n\n{fix}\n"
    return _hindsight_template().substitute(
        attempt=render_message(session_canonical(pair.completion, pair.tools, memo)),
        feedback=pair.feedback,
        correction=correction,
    )


def _ids(ex: Example) -> dict[str, Any]:
    p = ex.pair
    return {
        "id": p.id,
        "session_id": p.session_id,
        "source": p.source,
        "tool": p.tool,
        "error_kind": p.error_kind,
        "model": p.model,
        "created_at": p.created_at,
        "corrected_at": p.corrected_at,
    }


def _head(kind: str, ex: Example) -> dict[str, Any]:
    return {"format": FORMATS[kind].name, "id": ex.pair.id, "session_id": ex.pair.session_id, "source": ex.pair.source}


# ---------------------------------------------------------------------------------------------
# Builders


def sdpo(ex: Example) -> Built:
    prompt = canonical(ex.pair.prompt, ex.pair.tools, ex.memo)
    return [
        {
            "format": FORMATS["sdpo"].name,
            **_ids(ex),
            "target": ex.pair.target,
            "prompt": prompt,
            "tools": ex.pair.tools,
            "completion": canonical_of(ex, ex.pair.completion),
            "feedback": ex.pair.feedback,
            "correction": None if ex.pair.correction is None else canonical_of(ex, ex.pair.correction),
            "chosen": None if ex.fit.message is None else canonical_message(ex.fit.message, tool_names(ex.pair.tools)),
            "chosen_derived": ex.fit.derived,
            "chosen_left_out": ex.fit.reason,
            "teacher_prompt": [*prompt, {"role": "user", "content": hindsight(ex.pair, ex.memo)}],
            "rendered": rendered(ex),
        }
    ]


def _user_ended(ex: Example) -> list[Message] | Left:
    prompt = fold_tool_results(prompt_of(ex))
    if not prompt or prompt[-1]["role"] != "user":
        return Left("prompt does not end with a user turn")
    return prompt


def trl_sdpo(ex: Example) -> Built:
    # TRL's experimental SDPOTrainer: `prompt` (ending with a user turn) and, with
    # include_environment_feedback=True, `privileged_context` as the environment's feedback.
    prompt = _user_ended(ex)
    if isinstance(prompt, Left):
        return prompt
    return [
        {
            **_head("trl-sdpo", ex),
            "prompt": prompt,
            "privileged_context": ex.pair.feedback,
            "tools": tools_column(ex),
            "ground_truth": ground_truth(ex),
            "rendered": rendered(ex),
        }
    ]


def trl_sdft(ex: Example) -> Built:
    # TRL's experimental SDFTTrainer: `prompt` and `privileged_context`, here a demonstration that
    # fits the prompt (the derived correction) and why the earlier reply failed.
    if ex.fit.message is None:
        return Left(ex.fit.reason or "no fitting correction")
    prompt = _user_ended(ex)
    if isinstance(prompt, Left):
        return prompt
    style = "json" if style_of(ex) in JSON_MODES else "text"
    demonstration = text_reply(ex.fit.message, style, written_call(ex))["content"]
    context = f"Example response:\n{demonstration}\n\nWhy an earlier reply failed: {ex.pair.feedback}"
    return [
        {
            **_head("trl-sdft", ex),
            "prompt": prompt,
            "privileged_context": context,
            "chosen_derived": ex.fit.derived,
            "tools": tools_column(ex),
            "rendered": rendered(ex),
        }
    ]


def dpo(ex: Example) -> Built:
    if ex.fit.message is None:
        return Left(ex.fit.reason or "no fitting correction")
    return [
        {
            **_head("dpo", ex),
            "prompt": prompt_of(ex),
            "chosen": [reply_of(ex, ex.fit.message)],
            "rejected": [reply_of(ex, ex.pair.completion)],
            "chosen_derived": ex.fit.derived,
            "tools": tools_column(ex),
            "rendered": rendered(ex),
        }
    ]


def sft(ex: Example) -> Built:
    # Prompt/completion conversational shape: only the correction is trained, not earlier turns.
    if ex.fit.message is None:
        return Left(ex.fit.reason or "no fitting correction")
    return [
        {
            **_head("sft", ex),
            "prompt": prompt_of(ex),
            "completion": [reply_of(ex, ex.fit.message)],
            "chosen_derived": ex.fit.derived,
            "tools": tools_column(ex),
            "rendered": rendered(ex),
        }
    ]


def kto(ex: Example) -> Built:
    """Unpaired verdicts: the failed reply (label false), its fitting correction (true), and edits
    the user accepted (true)."""
    prompt, tools = prompt_of(ex), tools_column(ex)
    if ex.label is not None:
        return [
            {
                **_head("kto", ex),
                "prompt": prompt,
                "completion": [reply_of(ex, ex.pair.completion)],
                "label": ex.label,
                "tools": tools,
                "rendered": rendered(ex),
            }
        ]
    records = [
        {
            **_head("kto", ex),
            "prompt": prompt,
            "completion": [reply_of(ex, ex.pair.completion)],
            "label": False,
            "tools": tools,
            "rendered": rendered(ex),
        }
    ]
    if ex.fit.message is not None:
        records.append(
            {
                **_head("kto", ex),
                "id": f"{ex.pair.id}-fix",
                "prompt": prompt,
                "completion": [reply_of(ex, ex.fit.message)],
                "label": True,
                "chosen_derived": ex.fit.derived,
                "tools": tools,
                "rendered": None,
            }
        )
    return records


def verl(ex: Example) -> Built:
    """A verl RL row. Values that vary in shape are JSON text so the parquet schema is fixed;
    extra_info's `index` and `tools_kwargs` are filled in when the split is written."""
    return [
        {
            "format": FORMATS["verl"].name,
            "data_source": f"teachback/{ex.pair.source}",
            "prompt": [_flat_message(m) for m in prompt_of(ex)],
            "ability": "coding",
            "reward_model": {"style": "rule", "ground_truth": ground_truth(ex)},
            "extra_info": {
                **{k: v for k, v in _ids(ex).items() if k not in ("created_at", "corrected_at")},
                "feedback": ex.pair.feedback,
                "privileged_context": hindsight(ex.pair, ex.memo),
                "tools": json.dumps(tools_of(ex), ensure_ascii=False),
                "rendered": json.dumps(rendered(ex), ensure_ascii=False),
                "need_tools_kwargs": False,
                "created_at": ex.pair.created_at,
            },
        }
    ]


def _flat_message(message: Message) -> Message:
    calls = message.get("tool_calls") or None
    return {
        "role": message["role"],
        "content": message["content"],
        "tool_calls": None
        if calls is None
        else [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["function"]["name"], "arguments": _json_text(c["function"]["arguments"])},
            }
            for c in calls
        ],
        "tool_call_id": message.get("tool_call_id"),
    }


def _json_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
