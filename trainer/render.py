"""A record's token ids exactly as the model saw them: prompt, teacher prompt, completion, correction.

A record of a model that was given a rendered form (the embedded model in the grammar or text
tool mode) carries that form: the messages it was given, the prompt ids llama.cpp was fed, the ids
it sampled and their log-probabilities. Those are used as they are whenever the tokenizer being
trained is the sampler's (its ids decode and re-encode to themselves); otherwise, and for records
without a rendered form, the conversation is rendered as the agent renders it for a model: the
model's chat template with the tool schemas when the template takes tools, else the text form
(tools in the system prompt, calls as text).

The teacher's prompt is the student's with one user turn, the hint, inserted before the reply, so
the two share every token up to the reply's generation prompt (`Rendered.shared`): that prefix is
computed once for both (trainer.scoring.PrefixCache).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template
from typing import Any

from feedback_store.export.views import text_reply, text_view

log = logging.getLogger(__name__)

Message = dict[str, Any]
JSON_MODES = ("grammar", "json_object")  # the model writes a bare JSON call object
HINTS = ("feedback", "demonstration", "hindsight")


class RenderError(ValueError):
    """A record that cannot be rendered for this tokenizer; the message says why and what to do."""


@dataclass(frozen=True)
class Rendered:
    prompt: list[int]  # what the student sees: the prompt the model was fed
    teacher: list[int]  # the same conversation with the hint turn before the reply
    shared: int  # tokens prompt and teacher have in common (the conversation before the reply)
    completion: list[int]  # the failed reply's tokens, as sampled (no end-of-turn token)
    sampler_logprobs: list[float] | None  # the sampler's log-probability of each completion token
    chosen: list[int] | None  # the correction's tokens, as the model writes it (no end-of-turn token)
    recorded: bool  # prompt and completion are the recorded ids, not a re-rendering
    # The failed reply's tokens as `chosen`'s were made (both the sampled ids, or both this
    # tokenizer's encoding of the text), for comparing the two: None without a correction.
    rejected: list[int] | None = None
    # Where the failed reply parts from the teacher's demonstration (tokens of `completion` they
    # share): the teacher's verdict on the failure is read at that token. None without one.
    decides: int | None = None


def render(record: dict[str, Any], tokenizer: Any, hint: str = "feedback") -> Rendered:
    """The record's ids. The failed reply and the correction end the same way (before the
    end-of-turn token, as the sampler's ids do) and are tokenised the same way, so that nothing
    but their content tells them apart."""
    messages, tools = conversation(record, tokenizer)
    opened = template_ids(tokenizer, messages, tools, generation=True)
    recorded = _recorded(record, tokenizer)
    prompt = recorded[0] if recorded else opened
    teacher, shared = _teacher(tokenizer, messages, tools, prompt, opened, hint_text(record, tokenizer, hint))

    def written(reply: Message) -> list[int]:
        return _reply_ids(tokenizer, messages, tools, opened, reply, False)

    if recorded:
        completion, logprobs = recorded[1], recorded[2]
    else:
        completion, logprobs = written(_completion_message(record, tokenizer)), None
    chosen = rejected = None
    if record.get("chosen"):
        given = record.get("rendered") or {}
        sampled = given.get("chosen_token_ids")
        if recorded and sampled and tokenizer.decode(sampled) == given.get("chosen"):
            chosen, rejected = list(sampled), completion
        else:
            chosen = written(_chosen_message(record, tokenizer))
            rejected = written(_completion_message(record, tokenizer)) if recorded else completion
    return Rendered(prompt, teacher, shared, completion, logprobs, chosen, recorded is not None, rejected)


def prompt_ids(record: dict[str, Any], tokenizer: Any) -> list[int]:
    """The token ids of the failed reply's prompt as the model saw them."""
    recorded = _recorded(record, tokenizer)
    if recorded:
        return recorded[0]
    messages, tools = conversation(record, tokenizer)
    return template_ids(tokenizer, messages, tools, generation=True)


def teacher_ids(record: dict[str, Any], tokenizer: Any, hint: str = "feedback") -> list[int]:
    """The same prompt with the hint turn before the reply."""
    return render(record, tokenizer, hint).teacher


def conversation(record: dict[str, Any], tokenizer: Any) -> tuple[list[Message], list[dict] | None]:
    """The messages (and tool schemas, for a tool-aware template) the model is given."""
    form = view(record, tokenizer)
    if form == "rendered":
        return [_plain(m) for m in record["rendered"]["messages"]], None
    if form == "native":
        return record["prompt"], record.get("tools") or None
    return [_plain(m) for m in text_view(record["prompt"], record.get("tools") or [])], None


def view(record: dict[str, Any], tokenizer: Any) -> str:
    """rendered: the recorded form the model was given; native: the canonical conversation and
    the tool schemas through a tool-aware chat template; text: teachback's text form."""
    if (record.get("rendered") or {}).get("messages") is not None:
        return "rendered"
    return "native" if takes_tools(tokenizer) else "text"


def takes_tools(tokenizer: Any) -> bool:
    return "tools" in (tokenizer.chat_template or "")


def template_ids(tokenizer: Any, messages: list[Message], tools: list[dict] | None, *, generation: bool) -> list[int]:
    out = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=generation, return_dict=True)
    return list(out["input_ids"])


def hint_text(record: dict[str, Any], tokenizer: Any, hint: str) -> str:
    """What the teacher is told that the student was not.

    feedback: the feedback alone (the failed reply is not repeated: a small model copies it);
    demonstration: a reply that works here (the correction, written as the model writes calls) and
    the feedback, SDFT-style, falling back to feedback without one; hindsight: the export's own
    teacher turn (the failed reply quoted, the feedback, the correction)."""
    if hint == "hindsight":
        return record["teacher_prompt"][-1]["content"]
    if hint == "demonstration" and record.get("chosen"):
        example = _chosen_text(record)
        return _hint_template("demonstration").substitute(example=example, feedback=record["feedback"])
    if hint in ("feedback", "demonstration"):
        return _hint_template("feedback").substitute(feedback=record["feedback"])
    raise RenderError(f"unknown hint {hint!r}: use one of {', '.join(HINTS)}")


@cache
def _hint_template(name: str) -> Template:
    return Template(resources.files("trainer").joinpath(f"hint_{name}.txt").read_text(encoding="utf-8").strip())


def _teacher(
    tokenizer: Any, messages: list[Message], tools: list[dict] | None, prompt: list[int], opened: list[int], hint: str
) -> tuple[list[int], int]:
    """The teacher's ids and how many leading ids it shares with `prompt`: the prompt's
    generation suffix is moved after the hint turn, so the conversation before it is shared."""
    closed = template_ids(tokenizer, messages, tools, generation=False)
    hinted = template_ids(tokenizer, [*messages, {"role": "user", "content": hint}], tools, generation=True)
    generation = opened[len(closed) :]
    if (
        opened[: len(closed)] != closed
        or hinted[: len(closed)] != closed
        or prompt[len(prompt) - len(generation) :] != generation
    ):
        return hinted, common_prefix(prompt, hinted)  # a template whose turns are not appended one after another
    shared = len(prompt) - len(generation)
    return prompt[:shared] + hinted[len(closed) :], shared


def _reply_ids(
    tokenizer: Any, messages: list[Message], tools: list[dict] | None, opened: list[int], reply: Message, closed: bool
) -> list[int]:
    """A reply's ids as the template writes them after the prompt, up to (and with `closed`,
    including) the end-of-turn token."""
    full = template_ids(tokenizer, [*messages, reply], tools, generation=False)
    if full[: len(opened)] != opened:
        raise RenderError(
            "the chat template does not write a reply after the prompt it renders; "
            "train with a model whose template appends turns (ChatML and most instruct templates do)."
        )
    ids = full[len(opened) :]
    end = tokenizer.eos_token_id
    if end in ids:
        ids = ids[: ids.index(end) + 1]
    return ids if closed or not ids or ids[-1] != end else ids[:-1]


def _recorded(record: dict[str, Any], tokenizer: Any) -> tuple[list[int], list[int], list[float] | None] | None:
    """The recorded prompt and completion ids and the sampled log-probabilities, when they are in
    this tokenizer's vocabulary: the prompt ids decode to the conversation as its template writes
    it. (They are not always this tokenizer's own encoding of that text: llama.cpp writes " \n" as
    one token where the Hugging Face tokenizer writes two, so the recorded ids are the ones used.)"""
    rendered = record.get("rendered") or {}
    prompt, completion = rendered.get("prompt_token_ids"), rendered.get("completion_token_ids")
    if not prompt or completion is None:
        return None
    messages, tools = conversation(record, tokenizer)
    text = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
    if tokenizer.decode(prompt) != text:
        log.warning(
            "record %s: its recorded token ids do not spell its prompt in this tokenizer's vocabulary "
            "(a model other than the one that sampled it); rendering it again",
            record.get("id"),
        )
        return None
    logprobs = rendered.get("logprobs")
    values = [entry["logprob"] for entry in logprobs] if logprobs and len(logprobs) == len(completion) else None
    return list(prompt), list(completion), values


def _completion_message(record: dict[str, Any], tokenizer: Any) -> Message:
    rendered = record.get("rendered") or {}
    if rendered.get("completion") is not None:
        return {"role": "assistant", "content": rendered["completion"]}
    return _reply_message(record, record["completion"], tokenizer)


def _chosen_message(record: dict[str, Any], tokenizer: Any) -> Message:
    """The correction as the model writes it: the export's text of it for a model given a rendered
    form (its own reply's text, or a derived call written as it writes calls), else as the
    failed reply is rendered."""
    if view(record, tokenizer) == "rendered" and (record.get("rendered") or {}).get("chosen") is not None:
        return {"role": "assistant", "content": record["rendered"]["chosen"]}
    return _reply_message(record, record["chosen"], tokenizer)


def _chosen_text(record: dict[str, Any]) -> str:
    """The correction as text, as the model writes it, for the demonstration hint."""
    given = (record.get("rendered") or {}).get("chosen")
    return given if given is not None else _as_text(record, record["chosen"])["content"]


def _reply_message(record: dict[str, Any], message: Message, tokenizer: Any) -> Message:
    """An assistant message as the session's model writes it: as is through a tool-aware
    template, else as text (a bare JSON call object in the grammar and json_object modes)."""
    return message if view(record, tokenizer) == "native" else _as_text(record, message)


def _as_text(record: dict[str, Any], message: Message) -> Message:
    mode = (record.get("rendered") or {}).get("tool_mode")
    return _plain(text_reply(message, "json" if mode in JSON_MODES else "text"))


def _plain(message: Message) -> Message:
    """Role and text, as the embedded provider hands messages to the chat template."""
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return {"role": message.get("role", "user"), "content": content or ""}


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


# ---------------------------------------------------------------------------------------------
# Branch records (tasks.branches): replies sampled at a recorded state, labelled by running them

BRANCH_PREFIX = "teachback-branch-"


def is_branch(record: dict[str, Any]) -> bool:
    return str(record.get("format", "")).startswith(BRANCH_PREFIX)


def render_branch(record: dict[str, Any], tokenizer: Any) -> Rendered:
    """A branch record's ids: the prompt the model was given, and its sampled replies, as
    sampled when the ids spell them in this tokenizer's vocabulary, else as its template writes
    them. sft: `chosen` is the verified success (no failed reply); dpo: `chosen` and `rejected`
    are a success and a failure at the same state; sdpo: `completion` is the failure, and the
    teacher sees a verified success at that state as its demonstration, with what running the
    failure found (the failed reply itself is not quoted: a small model copies it); that success
    is also `chosen`, the correction mix trains sft on."""
    messages = [_plain(m) for m in record.get("prompt") or []]
    if not messages:
        raise RenderError("a branch record without a prompt; write it again with `teachback tasks branch`")
    ids = record.get("token_ids") or {}
    opened = template_ids(tokenizer, messages, None, generation=True)
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    given = ids.get("prompt")
    recorded = bool(given) and tokenizer.decode(given) == text
    prompt = list(given) if recorded else opened

    def reply(field_name: str) -> list[int] | None:
        message = record.get(field_name)
        if not message:
            return None
        content = _plain(message[-1] if isinstance(message, list) else message)["content"]
        sampled = ids.get(field_name)
        if recorded and sampled and tokenizer.decode(sampled) == content:
            return list(sampled)
        return _reply_ids(tokenizer, messages, None, opened, {"role": "assistant", "content": content}, False)

    kind = record["format"].removeprefix(BRANCH_PREFIX).rsplit("-", 1)[0]
    if kind == "sft":
        chosen, failed = reply("completion"), []
    elif kind == "dpo":
        chosen, failed = reply("chosen"), reply("rejected") or []
    elif kind == "sdpo":  # the demonstration is a verified success at this state: mix's correction
        chosen, failed = reply("demonstration"), reply("completion") or []
    else:
        raise RenderError(f"unknown branch record {record['format']!r}: write it again with `teachback tasks branch`")
    decides = None
    if kind == "sdpo" and record.get("demonstration"):
        shown = _plain(record["demonstration"][-1])["content"]
        hint = _hint_template("demonstration").substitute(example=shown, feedback=record.get("feedback", ""))
        decides = common_prefix(failed, reply("demonstration") or [])
    else:
        hint = _hint_template("feedback").substitute(feedback=record.get("feedback", ""))
    teacher, shared = _teacher(tokenizer, messages, None, prompt, opened, hint)
    rejected = failed if chosen is not None and failed else None
    return Rendered(prompt, teacher, shared, failed, None, chosen, recorded, rejected, decides)
