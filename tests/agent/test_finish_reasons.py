"""A reply the model did not end itself ends the turn with its own reason: cut at the token limit
(max_tokens) or refused (refusal), through the scripted provider's finish_reason."""

from __future__ import annotations

from agent.protocol import TurnFinished


async def test_a_reply_cut_at_the_token_limit_ends_the_turn_as_max_tokens(git_repo, script, run_agent):
    model = script({"content": "The first half of an answer", "finish_reason": "length"})
    run = await run_agent(git_repo, model, max_tokens=8)
    assert run.finished.reason == "max_tokens"
    assert "max_tokens = 8" in run.finished.summary and "TEACHBACK_MAX_TOKENS" in run.finished.summary
    assert [e.reason for e in run.of(TurnFinished)] == ["max_tokens"]


async def test_a_refused_reply_ends_the_turn_as_refusal(git_repo, script, run_agent):
    model = script({"content": "I cannot help with that.", "finish_reason": "content_filter"})
    run = await run_agent(git_repo, model)
    assert run.finished.reason == "refusal"


async def test_a_reply_the_model_ended_is_an_answer(git_repo, script, run_agent):
    model = script({"content": "All done."})
    run = await run_agent(git_repo, model)
    assert run.finished.reason == "answered" and run.finished.summary == "All done."
