"""The scripted model: a litellm custom provider that replays assistant turns from a JSON file.

Model string `scripted/<path>`; the file is a list of turns in OpenAI chat shape:
`{"content": str | null, "tool_calls": [{"id": str?, "function": {"name": str, "arguments": str}}],
"delay": seconds?, "error": kind?, "times": n?, "finish_reason": str?, "token_ids": {"prompt": [int],
"completion": [int]}?}` (how the reply ends, e.g. "length" or "content_filter"; by default "tool_calls"
or "stop"; `token_ids`: reported as the embedded model reports what it was given and sampled, so a
recorded session's states can be replayed). `arguments` is sent exactly as
written, so a script can send invalid JSON, an unknown tool or wrong types on purpose. A turn with `error` (rate_limit,
unavailable, connection, auth, not_found, context_window) fails that way `times` times (default:
every time) before it answers, to exercise retries. Which turn comes next is derived from the conversation (the
number of assistant messages so far), so the provider keeps no state. When the script runs out it
answers with a final message and no tool calls.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from litellm import CustomLLM
from litellm.types.utils import (
    ChatCompletionMessageToolCall,
    Function,
    Message,
    ModelResponse,
    Usage,
)

from agent.providers import ProviderSetupError

END_OF_SCRIPT = "The script has no more turns; stopping here."


class ScriptError(ProviderSetupError, ValueError):
    pass


def load_script(path: str) -> list[dict[str, Any]]:
    file = Path(path)
    try:
        turns = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScriptError(
            f"cannot read script {path}: {exc.strerror}. The model string is scripted/<path to a JSON file>."
        ) from exc
    except json.JSONDecodeError as exc:
        raise ScriptError(f"script {path} is not valid JSON: {exc}") from exc
    if not isinstance(turns, list) or not all(isinstance(t, dict) for t in turns):
        raise ScriptError(f"script {path} must be a JSON list of assistant turns (objects).")
    for number, turn in enumerate(turns):
        ids = turn.get("token_ids", {})
        if not isinstance(ids, dict) or not all(
            key in ("prompt", "completion") and isinstance(v, list) and all(type(i) is int for i in v)
            for key, v in ids.items()
        ):
            raise ScriptError(
                f"script {path}, turn {number}: token_ids must be an object with prompt and/or completion, "
                "each a list of integers."
            )
        for call in turn.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if (
                not isinstance(function, dict)
                or not isinstance(function.get("name"), str)
                or not isinstance(function.get("arguments"), str)
            ):
                raise ScriptError(
                    f"script {path}, turn {number}: each tool call needs function.name and function.arguments "
                    "as strings (arguments is the raw JSON text)."
                )
    return turns


def next_turn(path: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    turns = load_script(path)
    index = sum(1 for m in messages if m.get("role") == "assistant")
    if index < len(turns):
        return turns[index]
    return {"content": END_OF_SCRIPT, "tool_calls": []}


def _usage(messages: list[dict[str, Any]], turn: dict[str, Any]) -> Usage:
    prompt_chars = sum(len(json.dumps(m)) for m in messages)
    completion_chars = len(turn.get("content") or "") + sum(
        len(c["function"]["arguments"]) + len(c["function"]["name"]) for c in turn.get("tool_calls") or []
    )
    prompt, completion = prompt_chars // 4 + 1, completion_chars // 4 + 1
    return Usage(prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion)


def _call_id(turn_calls: list[dict[str, Any]], index: int, messages: list[dict[str, Any]]) -> str:
    return turn_calls[index].get("id") or f"call_{len(messages)}_{index}"


def _response(model: str, messages: list[dict[str, Any]], turn: dict[str, Any]) -> ModelResponse:
    calls = turn.get("tool_calls") or []
    tool_calls = [
        ChatCompletionMessageToolCall(
            id=_call_id(calls, i, messages),
            type="function",
            function=Function(name=c["function"]["name"], arguments=c["function"]["arguments"]),
        )
        for i, c in enumerate(calls)
    ]
    message = Message(role="assistant", content=turn.get("content"), tool_calls=tool_calls or None)
    response = ModelResponse(
        model=model,
        choices=[
            {
                "index": 0,
                "message": message,
                "finish_reason": turn.get("finish_reason") or ("tool_calls" if calls else "stop"),
            }
        ],
    )
    response.usage = _usage(messages, turn)  # type: ignore[attr-defined]
    return response


def _chunks(messages: list[dict[str, Any]], turn: dict[str, Any]) -> Iterator[dict[str, Any]]:
    content = turn.get("content") or ""
    calls = turn.get("tool_calls") or []
    # Text arrives in a few pieces so frontends see real streaming.
    pieces = [content[i : i + 16] for i in range(0, len(content), 16)]
    for piece in pieces:
        yield {"text": piece, "tool_use": None, "is_finished": False, "finish_reason": "", "usage": None, "index": 0}
    for i, call in enumerate(calls):
        yield {
            "text": "",
            "tool_use": {
                "id": _call_id(calls, i, messages),
                "type": "function",
                "index": i,
                "function": {"name": call["function"]["name"], "arguments": call["function"]["arguments"]},
            },
            "is_finished": False,
            "finish_reason": "",
            "usage": None,
            "index": 0,
        }
    usage = _usage(messages, turn)
    yield {
        "text": "",
        "tool_use": None,
        "is_finished": True,
        "finish_reason": turn.get("finish_reason") or ("tool_calls" if calls else "stop"),
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
        },
        "index": 0,
        **({"provider_specific_fields": {"token_ids": turn["token_ids"]}} if turn.get("token_ids") else {}),
    }


def _raise_scripted_error(model: str, kind: str) -> None:
    import litellm

    message = f"scripted {kind} error"
    errors = {
        "rate_limit": lambda: litellm.RateLimitError(message, "scripted", model),
        "unavailable": lambda: litellm.ServiceUnavailableError(message, "scripted", model),
        "connection": lambda: litellm.APIConnectionError(message, "scripted", model),
        "auth": lambda: litellm.AuthenticationError(message, "scripted", model),
        "not_found": lambda: litellm.NotFoundError(message, model, "scripted"),
        "context_window": lambda: litellm.ContextWindowExceededError(message, model, "scripted"),
    }
    if kind not in errors:
        raise ScriptError(f"unknown scripted error {kind!r}; known: {', '.join(errors)}")
    raise errors[kind]()


class ScriptedLLM(CustomLLM):
    def __init__(self) -> None:
        super().__init__()
        self._failures: dict[tuple[str, int], int] = {}  # (script, turn index) -> errors raised so far

    def _turn(self, model: str, messages: list) -> dict[str, Any]:
        turn = next_turn(model, messages)
        kind = turn.get("error")
        if kind:
            key = (model, sum(1 for m in messages if m.get("role") == "assistant"))
            raised = self._failures.get(key, 0)
            if turn.get("times") is None or raised < int(turn["times"]):
                self._failures[key] = raised + 1
                _raise_scripted_error(model, kind)
        return turn

    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        turn = self._turn(model, messages)
        time.sleep(float(turn.get("delay") or 0))
        return _response(model, messages, turn)

    async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        turn = self._turn(model, messages)
        await asyncio.sleep(float(turn.get("delay") or 0))
        return _response(model, messages, turn)

    def streaming(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        turn = self._turn(model, messages)
        time.sleep(float(turn.get("delay") or 0))
        yield from _chunks(messages, turn)

    async def astreaming(self, model: str, messages: list, *args: Any, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        turn = self._turn(model, messages)
        await asyncio.sleep(float(turn.get("delay") or 0))
        for chunk in _chunks(messages, turn):
            yield chunk
