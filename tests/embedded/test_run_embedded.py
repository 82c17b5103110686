"""`teachback run` on the embedded model, as a real process: a reply that would ramble stops at the
default cap and its tokens are counted, a reply that loops stops there, and Ctrl-C while the model
reads the prompt returns at once."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("llama_cpp")

from agent.config import REPLY_TOKENS  # noqa: E402
from agent.providers.early_stops import RepetitionGuard  # noqa: E402
from tests.agent.test_run_start import interrupt_when_asked  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.real_model, pytest.mark.timeout(300)]

RUN = [sys.executable, "-m", "cli", "run", "--json", "--no-record", "--model", "local/smollm2"]
COUNT = "Count from 1 to 500, one number per line."  # runs past the cap, never repeating itself
ESSAY = "Write a very long essay about cats, at least 3000 words."  # goes round in a loop of two sentences


def run(workspace, instruction: str) -> tuple[list[dict], float]:
    env = {**os.environ, "TEACHBACK_TOOL_MODE": "text"}
    started = time.monotonic()
    done = subprocess.run(
        [*RUN, "--workspace", str(workspace), instruction], capture_output=True, text=True, timeout=280, env=env
    )
    assert done.returncode == 1, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()], time.monotonic() - started


def test_a_rambling_reply_stops_at_the_default_cap_and_its_tokens_are_counted(git_repo) -> None:
    events, took = run(git_repo, COUNT)
    finished = events[-1]
    assert finished["type"] == "turn_finished" and finished["reason"] == "max_tokens"
    assert finished["steps"] == 1
    assert finished["completion_tokens"] == REPLY_TOKENS
    assert finished["prompt_tokens"] > 100
    assert f"the embedded model's cap of {REPLY_TOKENS} tokens" in finished["summary"]
    assert took < 240  # bounded by the cap: about 20 s on two idle cores, minutes when they are shared


def test_a_reply_that_loops_stops_where_the_loop_is_seen(git_repo) -> None:
    events, _ = run(git_repo, ESSAY)
    [usage] = [e for e in events if e["type"] == "model_usage"]
    sampled = usage["completion_token_ids"]
    assert events[-1]["reason"] == "max_tokens"
    assert events[-1]["completion_tokens"] == len(sampled) < REPLY_TOKENS
    guard = RepetitionGuard()
    assert [guard.add(token) for token in sampled].index(True) == len(sampled) - 1  # its last token


def test_ctrl_c_while_the_model_reads_the_prompt_returns_within_two_seconds(git_repo) -> None:
    env = {**os.environ, "TEACHBACK_TOOL_MODE": "text"}
    process = subprocess.Popen(
        [*RUN, "--workspace", str(git_repo), ESSAY],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    # the system prompt is over a thousand tokens: a second in, llama.cpp is reading it
    out, err, took = interrupt_when_asked(process, settle=1.0, timeout=60)
    assert took < 2.0, f"returned {took:.1f}s after Ctrl-C"
    assert json.loads(out.splitlines()[-1])["reason"] == "interrupted", err
    assert process.returncode == 1


async def test_a_request_given_up_mid_prompt_frees_the_model_at_once() -> None:
    from agent.llm import load_litellm
    from agent.providers.llama_engine import load_engine, model_path

    litellm = load_litellm()
    engine = load_engine(str(model_path("smollm2")))  # the engine the provider serves local/smollm2 with
    long_prompt = [{"role": "user", "content": "cats and dogs " * 1000}]  # seconds of prompt batches to read
    request = asyncio.ensure_future(litellm.acompletion(model="local/smollm2", messages=long_prompt, max_tokens=4))
    await asyncio.sleep(1.0)
    assert not request.done()
    request.cancel()
    given_up = time.monotonic()
    await asyncio.wrap_future(engine.worker.submit(lambda: None))  # runs once the model is free
    assert time.monotonic() - given_up < 1.5
