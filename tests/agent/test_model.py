"""The model adapter over litellm: streaming, usage, retries and which errors are final."""

from __future__ import annotations

import asyncio

import pytest

from agent.model import LiteLLMModel, ModelError
from agent.protocol import ErrorEvent, ModelUsage
from tests.conftest import call, turn


async def test_streams_text_and_assembles_tool_calls(script):
    model = LiteLLMModel(
        script(
            turn(
                call("read_file", {"path": "a.py"}, call_id="c1"),
                call("finish", "{}"),
                content="Looking at a.py first, then done.",
            )
        )
    )
    deltas: list[str] = []
    reply = await model.complete([{"role": "user", "content": "go"}], [], deltas.append)
    assert "".join(deltas) == "Looking at a.py first, then done." and len(deltas) > 1
    assert reply.message["content"] == "Looking at a.py first, then done."
    assert [c["function"]["name"] for c in reply.tool_calls] == ["read_file", "finish"]
    assert reply.tool_calls[0]["id"] == "c1" and reply.tool_calls[1]["function"]["arguments"] == "{}"
    assert reply.prompt_tokens > 0 and reply.completion_tokens > 0 and reply.attempts == 1


async def test_transient_errors_are_retried_with_backoff(script):
    model = LiteLLMModel(script({"error": "rate_limit", "times": 2, "content": "ok", "tool_calls": []}), backoff_s=0.05)
    reply = await model.complete([{"role": "user", "content": "go"}], [])
    assert reply.attempts == 3 and reply.message["content"] == "ok"


async def test_retries_are_bounded(script):
    model = LiteLLMModel(script({"error": "unavailable", "content": "never"}), backoff_s=0.01, max_retries=2)
    with pytest.raises(ModelError) as info:
        await model.complete([{"role": "user", "content": "go"}], [])
    assert info.value.kind == "unavailable"


@pytest.mark.parametrize(
    ("kind", "advice"), [("auth", "API key"), ("not_found", "model name"), ("context_window", "context window")]
)
async def test_final_errors_are_not_retried(script, kind, advice):
    model = LiteLLMModel(script({"error": kind, "times": 1, "content": "would succeed on retry"}), backoff_s=0.01)
    with pytest.raises(ModelError) as info:
        await model.complete([{"role": "user", "content": "go"}], [])
    assert info.value.kind == kind and advice in str(info.value)


async def test_a_model_failure_ends_the_turn_with_an_error_event(git_repo, script, run_agent):
    run = await run_agent(git_repo, script({"error": "auth"}))
    assert run.finished.reason == "error"
    errors = run.of(ErrorEvent)
    assert len(errors) == 1 and errors[0].kind == "auth"
    assert not run.of(ModelUsage)


async def test_a_provider_set_up_wrongly_fails_at_once_with_its_own_message(tmp_path):
    model = LiteLLMModel(f"scripted/{tmp_path}/missing.json", backoff_s=5)
    with pytest.raises(ModelError) as info:
        await asyncio.wait_for(model.complete([{"role": "user", "content": "go"}], []), 3)
    assert info.value.kind == "setup"
    assert "cannot read script" in str(info.value) and "Traceback" not in str(info.value)
