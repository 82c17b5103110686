"""K seeded samples of one prompt (state replay's K samples of one state) evaluate the prompt once:
each later sample evaluates its last token only, and draws what a fresh start draws at its seed.
On the two-layer model as a GGUF file (`tiny_gguf`): what is checked is which tokens llama.cpp
evaluates and that the same arithmetic gives the same samples, not what the model says."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.providers.llama_engine import Outcome, generate, load_engine

# Longer than one batch of llama.cpp's (512 tokens), so that the prompt ends in a short batch.
SYSTEM = "You are a careful coding agent. " + " ".join(f"Rule {n}: read a file before editing it." for n in range(90))
STATE = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Restore word_count in textkit/words.py."}]
PARAMS = {"temperature": 1.0, "max_tokens": 12}


def sample(engine, messages: list[dict], seed: int) -> Outcome:
    outcome = Outcome()
    for _ in generate(engine, messages, {**PARAMS, "seed": seed}, outcome):
        pass
    return outcome


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_k_samples_of_one_state_evaluate_its_prompt_once_and_each_draws_what_a_fresh_start_draws(
    tiny_gguf: Path,
) -> None:
    engine = load_engine(str(tiny_gguf), 2048, 1)
    engine.llm.reset()  # a fresh start, whatever this process ran on the engine before
    seeds = [11, 12, 13, 14]
    warm = [sample(engine, STATE, seed) for seed in seeds]
    prompt = warm[0].prompt_tokens
    assert prompt > engine.llm.n_batch and prompt % engine.llm.n_batch != 1  # whole batches, then a short one
    assert [o.prompt_evaluated for o in warm] == [prompt, 1, 1, 1]  # the prompt once, then its last token alone
    assert len({tuple(o.completion_token_ids) for o in warm}) > 1  # the seeds drew different samples

    for seed, drawn in zip(seeds, warm, strict=True):
        engine.llm.reset()
        cold = sample(engine, STATE, seed)
        assert cold.prompt_evaluated == prompt
        assert cold.completion_token_ids == drawn.completion_token_ids, seed

    # The agent loop's next step: a longer prompt reuses the whole batches it shares with the cached one.
    reply = {"role": "assistant", "content": '{"name": "read_file", "arguments": {"path": "textkit/words.py"}}'}
    later = [*STATE, reply, {"role": "user", "content": "def word_count(text):\n    raise NotImplementedError\n"}]
    after = sample(engine, later, 5)
    assert after.prompt_evaluated == after.prompt_tokens - prompt // engine.llm.n_batch * engine.llm.n_batch
    engine.llm.reset()
    assert sample(engine, later, 5).completion_token_ids == after.completion_token_ids
