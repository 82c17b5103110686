"""The embedded model through litellm, as the agent calls it: `local/smollm2`."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("llama_cpp")

from agent.llm import load_litellm  # noqa: E402
from agent.protocol import textcalls  # noqa: E402
from agent.tools import default_toolbox  # noqa: E402

MODEL = "local/smollm2"
QUESTION = [{"role": "user", "content": "Name three colours."}]

pytestmark = [pytest.mark.slow, pytest.mark.real_model, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def litellm():
    return load_litellm()


def test_completion_has_text_usage_and_logprobs(litellm) -> None:
    response = litellm.completion(model=MODEL, messages=QUESTION, max_tokens=24, temperature=0.7, seed=3)
    choice = response.choices[0]
    assert isinstance(choice.message.content, str) and choice.message.content.strip()
    assert response.usage.prompt_tokens > 10
    assert 0 < response.usage.completion_tokens <= 24
    tokens = choice.logprobs.content
    assert len(tokens) == response.usage.completion_tokens
    assert all(t.logprob <= 0.0 and isinstance(t.token, str) for t in tokens)
    assert any(t.logprob < 0.0 for t in tokens)
    assert "".join(t.token for t in tokens) == choice.message.content
    assert litellm.completion_cost(response, custom_llm_provider="local") == 0.0


def test_same_request_and_seed_give_the_same_reply(litellm) -> None:
    first = litellm.completion(model=MODEL, messages=QUESTION, max_tokens=12, temperature=0.0, seed=1)
    second = litellm.completion(model=MODEL, messages=QUESTION, max_tokens=12, temperature=0.0, seed=1)
    assert first.choices[0].message.content == second.choices[0].message.content


def test_max_tokens_ends_with_length(litellm) -> None:
    response = litellm.completion(
        model=MODEL, messages=[{"role": "user", "content": "Write a long story about a cat."}], max_tokens=5
    )
    assert response.usage.completion_tokens == 5
    assert response.choices[0].finish_reason == "length"


def test_stop_string_cuts_the_reply(litellm) -> None:
    response = litellm.completion(model=MODEL, messages=QUESTION, max_tokens=40, stop=[","], temperature=0.0)
    assert "," not in response.choices[0].message.content


async def test_async_stream_has_text_logprobs_and_usage(litellm) -> None:
    stream = await litellm.acompletion(
        model=MODEL, messages=QUESTION, max_tokens=20, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    logprobs = [lp for c in chunks if c.choices and c.choices[0].logprobs for lp in c.choices[0].logprobs.content]
    usage = next(c.usage for c in reversed(chunks) if getattr(c, "usage", None))
    assert text.strip()
    assert usage.completion_tokens == len(logprobs) > 0
    assert "".join(lp.token for lp in logprobs) == text


def test_sync_stream(litellm) -> None:
    chunks = list(litellm.completion(model=MODEL, messages=QUESTION, max_tokens=10, stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).strip()
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


async def test_generation_does_not_block_the_event_loop(litellm) -> None:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    await litellm.acompletion(model=MODEL, messages=QUESTION, max_tokens=40, temperature=0.0)
    stream = await litellm.acompletion(model=MODEL, messages=QUESTION, max_tokens=40, stream=True)
    async for _ in stream:
        pass
    ticker.cancel()
    assert ticks >= 10


def test_forced_tool_choice_returns_a_valid_call(litellm) -> None:
    tools = default_toolbox().schemas()
    response = litellm.completion(
        model=MODEL,
        messages=[{"role": "user", "content": "Read the file app.py"}],
        tools=tools,
        tool_choice={"type": "function", "function": {"name": "read_file"}},
        max_tokens=60,
    )
    call = response.choices[0].message.tool_calls[0]
    assert call.function.name == "read_file"
    assert isinstance(json.loads(call.function.arguments)["path"], str)
    assert response.choices[0].finish_reason == "tool_calls"


def test_grammar_mode_reply_parses_as_a_call(litellm) -> None:
    tools = default_toolbox().schemas()
    names = [t["function"]["name"] for t in tools]
    messages = textcalls.to_text_messages([{"role": "user", "content": "List the files."}], tools)
    response = litellm.completion(
        model=MODEL, messages=messages, max_tokens=80, drop_params=True, **textcalls.grammar_kwargs(tools)
    )
    parsed = textcalls.parse_reply(response.choices[0].message.content, names)
    if parsed.error is None:  # a reply cut off by max_tokens is the one way to fail
        assert parsed.tool_calls and parsed.tool_calls[0]["function"]["name"] in names
    else:
        assert response.choices[0].finish_reason == "length"


def test_unknown_local_model_says_what_exists(litellm) -> None:
    from agent.providers.llama_engine import LocalModelError, model_path

    with pytest.raises(LocalModelError, match="local/smollm2"):
        model_path("no-such-model")
    with pytest.raises(Exception, match="unknown local model"):
        litellm.completion(model="local/no-such-model", messages=QUESTION)


def test_the_thread_setting_reaches_the_engine(git_repo, litellm) -> None:
    from agent.config import Settings
    from agent.providers.llama_engine import _ENGINES, usable_cpus
    from agent.runtime import open_session

    session = open_session(git_repo, Settings(model=MODEL, local_threads=1))
    assert session.model.extra["n_threads"] == 1  # what each model call of the session passes
    litellm.completion(model=MODEL, messages=QUESTION, max_tokens=2, **session.model.extra)
    [engine] = [engine for (_, _, threads), engine in _ENGINES.items() if threads == 1]
    assert engine.llm.n_threads == 1
    assert "n_threads" not in open_session(git_repo, Settings(model=MODEL)).model.extra
    litellm.completion(model=MODEL, messages=QUESTION, max_tokens=2)
    [default] = [engine for (_, _, threads), engine in _ENGINES.items() if threads is None]
    assert default.llm.n_threads == min(usable_cpus(), 8)
