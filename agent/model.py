"""The model adapter: every model call goes through litellm's `acompletion`, streaming text deltas,
with retries for transient failures, usage, cost, and logprobs when the backend returns them.

Models without native tool calls use the text tool-calling mode (agent.protocol.textcalls): the schemas go
into the system prompt and calls are parsed out of the reply.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.llm import ModelError, check_model, classify, describe, load_litellm, server_message

log = logging.getLogger(__name__)

# Models without native tool calls. The embedded model follows a JSON grammar far better than a
# prompt-only format (12 of 12 captured replies held a call, against 0 of 12 in text mode).
GRAMMAR_MODE_PREFIXES = ("local/",)


def resolved_tool_mode(model: str, tool_mode: str = "auto") -> str:
    """How `model` is given its tools: the `tool_mode` setting, and for "auto", the grammar for the
    models without native tool calls and native calls for the others."""
    if tool_mode != "auto":
        return tool_mode
    return "grammar" if model.startswith(GRAMMAR_MODE_PREFIXES) else "native"


@dataclass
class ModelReply:
    message: dict[str, Any]  # the assistant message to append, OpenAI shape
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    attempts: int = 1
    logprobs: list[dict[str, Any]] | None = None
    format_error: str | None = None  # text mode: the reply tried to call a tool but did not parse
    tool_mode: str = "native"
    rendered_messages: list[dict[str, Any]] | None = None  # text/grammar modes: the messages as sent
    prompt_token_ids: list[int] | None = None  # when the provider reports them (the embedded model)
    completion_token_ids: list[int] | None = None
    finish_reason: str | None = None  # the provider's: stop, tool_calls, length, content_filter, ...
    text: str | None = None  # text and grammar modes: the reply's words without its calls (AssistantMessage.text)

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return self.message.get("tool_calls") or []


@dataclass
class LiteLLMModel:
    name: str
    tool_mode: str = "auto"  # auto | native | text | grammar
    api_base: str | None = None
    max_retries: int = 3
    backoff_s: float = 0.5
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def mode(self) -> str:
        return resolved_tool_mode(self.name, self.tool_mode)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        on_delta: Callable[[str], None] | None = None,
    ) -> ModelReply:
        litellm = load_litellm()
        # max_retries=0: the provider SDK's own retries (openai's: 2 per call) would multiply the ones below.
        request: dict[str, Any] = {
            "model": self.name,
            "stream": True,
            "drop_params": True,
            "max_retries": 0,
            **self.extra,
        }
        if self.api_base:
            request["api_base"] = self.api_base
        mode = self.mode
        if mode == "native":
            request.update(messages=messages, tools=tools)
        else:
            from agent.protocol import textcalls

            request["messages"] = textcalls.to_text_messages(_raw_text_messages(messages), tools)
            if mode in ("grammar", "json_object"):
                request.update(_response_format(tools, mode))
        check_model(litellm, self.name, self.api_base)
        started = time.perf_counter()
        attempt, last_answer = 0, None
        while True:
            attempt += 1
            try:
                stream = await litellm.acompletion(**request, stream_options={"include_usage": True})
                content, calls, usage, logprobs, token_ids, finish_reason = await _collect(stream, on_delta)
                break
            except Exception as exc:  # classified below; anything unknown is re-raised
                kind = classify(litellm, exc, self.name, self.api_base)
                if kind is None:
                    raise
                answer = (getattr(exc, "status_code", None), server_message(exc))
                if kind == "unavailable" and answer[0] == 500 and answer == last_answer:
                    kind = "bad_request"  # the server answered, twice in the same words: it refuses this request
                last_answer = answer
                if kind != "unavailable" or attempt > self.max_retries:
                    text = describe(litellm, self.name, kind, exc, mode=mode, api_base=self.api_base)
                    raise ModelError(text, kind) from exc
                delay = self.backoff_s * 2 ** (attempt - 1)
                log.warning("model %s failed (%s); retry %d in %.1fs", self.name, exc, attempt, delay)
                await asyncio.sleep(delay)
        latency = (time.perf_counter() - started) * 1000
        message: dict[str, Any] = {"role": "assistant", "content": content or None}
        format_error, text = None, None
        if mode == "native":
            if calls:
                message["tool_calls"] = calls
        else:
            from agent.protocol import textcalls

            names = [t["function"]["name"] for t in tools]
            parsed = textcalls.parse_reply(content or "", names, id_prefix=f"call_{len(messages)}")
            format_error, text = parsed.error, parsed.content or ""
            if parsed.tool_calls:
                message["tool_calls"] = parsed.tool_calls
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        completion_tokens = int(usage.get("completion_tokens") or 0)
        return ModelReply(
            message=message,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            cost_usd=_cost(litellm, self.name, prompt_tokens, completion_tokens),
            latency_ms=latency,
            attempts=attempt,
            logprobs=logprobs or None,
            format_error=format_error,
            tool_mode=mode,
            rendered_messages=None if mode == "native" else request["messages"],
            prompt_token_ids=token_ids.get("prompt"),
            completion_token_ids=token_ids.get("completion"),
            finish_reason=finish_reason,
            text=text,
        )


async def _collect(stream: Any, on_delta: Callable[[str], None] | None):
    text_parts: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage: dict[str, Any] = {}
    logprobs: list[dict[str, Any]] = []
    token_ids: dict[str, list[int]] = {}
    finish_reason: str | None = None
    async for chunk in stream:
        if getattr(chunk, "usage", None):
            usage = dict(chunk.usage)
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        finish_reason = getattr(choice, "finish_reason", None) or finish_reason
        delta = choice.delta
        token_ids.update((getattr(delta, "provider_specific_fields", None) or {}).get("token_ids") or {})
        if delta.content:
            text_parts.append(delta.content)
            if on_delta is not None:
                on_delta(delta.content)
        for call in delta.tool_calls or []:
            index = call.index if call.index is not None else len(calls)
            entry = calls.setdefault(index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
            if call.id:
                entry["id"] = call.id
            if call.function is not None:
                entry["function"]["name"] += call.function.name or ""
                entry["function"]["arguments"] += call.function.arguments or ""
        content_logprobs = getattr(getattr(choice, "logprobs", None), "content", None)
        for item in content_logprobs or []:
            logprobs.append({"token": item.token, "logprob": float(item.logprob)})
    ordered = [calls[i] for i in sorted(calls)]
    for number, call in enumerate(ordered):
        call["id"] = call["id"] or f"call_{number}"
    return "".join(text_parts), ordered, usage, logprobs, token_ids, finish_reason


def _raw_text_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """In text mode an assistant message's content is the model's raw reply (calls included), so
    the parsed tool_calls are not rendered a second time."""
    return [
        {"role": "assistant", "content": m["content"]} if m.get("role") == "assistant" and m.get("content") else m
        for m in messages
    ]


def _response_format(tools: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    """The grammar mode's response_format: OpenAI's json_schema form, or the json_object form with
    a schema that llama-cpp-python's server takes."""
    from agent.protocol import textcalls

    kwargs = textcalls.grammar_kwargs(tools)
    if mode == "json_object":
        return {
            "response_format": {"type": "json_object", "schema": kwargs["response_format"]["json_schema"]["schema"]}
        }
    return kwargs


def _cost(litellm: Any, model: str, prompt_tokens: int, completion_tokens: int) -> float:
    if not (prompt_tokens or completion_tokens):
        return 0.0
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception as exc:  # litellm raises a bare Exception for models without a price
        log.debug("no price for %s: %s", model, exc)
        return 0.0
    return float(prompt_cost + completion_cost)
