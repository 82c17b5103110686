"""The gate sees over-calling, with a real adapter: the embedded model fine-tuned to answer every
question with a `read_file` call, served by llama.cpp, calls a tool at the no-tool probes where the
base answers with `finish`; the gate refuses it even where its call errors at the task states fall
with an interval below zero."""

from __future__ import annotations

import asyncio
import json
from importlib import resources
from pathlib import Path

import pytest

from agent.protocol.textcalls import to_text_messages
from agent.tools import default_toolbox
from tasks.gate import gate, judge
from tasks.probes import TRAINING_QUESTIONS, build_probes, probe_label, questions
from tasks.state_eval import document
from tasks.states import Sampler, State
from tests.tasks.test_state_eval import labels, states

READ = '{ "name": "read_file", "arguments": { "path": "textkit/words.py" } }'


def first_state(session: str, instruction: str) -> State:
    template = resources.files("agent").joinpath("prompts/system.md").read_text(encoding="utf-8")
    messages = [
        {"role": "system", "content": template.format(workspace="textkit", repo_map="")},
        {"role": "user", "content": instruction},
    ]
    config = {"tool_mode": "grammar", "temperature": 0.8, "max_tokens": 96}
    tools = default_toolbox().schemas()
    return State(session, 0, "t", messages, tools, config, {}, [1], None, [], [], {}, [])


@pytest.mark.slow
@pytest.mark.real_model
@pytest.mark.timeout(900)
def test_an_adapter_trained_to_always_call_a_tool_is_refused_at_the_no_tool_probes(
    embedded_model_dir: Path, tmp_path: Path
) -> None:
    from agent.providers.llama_engine import model_path
    from trainer.gguf_lora import ensure_served
    from trainer.train import TrainConfig, train

    held_out = [first_state(f"held-{i}", "Make the tests of textkit pass.") for i in range(12)]
    probes = build_probes(held_out)
    # Trained on questions disjoint from the held-out probes: the answer is always a read_file call.
    records = []
    for number, question in enumerate(questions(TRAINING_QUESTIONS)):
        state = first_state(f"train-{number}", question)
        records.append(
            {
                "format": "teachback-branch-sft-1",
                "id": f"train-{number}:0:0",
                "session_id": f"train-{number}",
                "step": 0,
                "task_id": "t",
                "prompt": to_text_messages(state.messages, state.tools),
                "completion": [{"role": "assistant", "content": READ}],
                "token_ids": {"prompt": None, "completion": None},
            }
        )
    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    base = str(embedded_model_dir)
    # Gradients on the last 48 tokens of each sequence, the question and the reply (the system
    # prompt and tools they share come from the cached prefix), instead of the default 128.
    config = TrainConfig(
        data=[data], out=tmp_path / "always", base=base, objective="sft", steps=16, lr=2e-3, batch_size=4, max_tokens=48
    )
    result = train(config)
    assert result.losses[-1] < result.losses[0]
    gguf = model_path("smollm2")
    served = ensure_served(result.adapter_dir, gguf)

    async def sample(model: str) -> list[list]:
        sampler = Sampler(model, cap=96)
        return [[probe_label(await sampler.sample(probe, k)) for k in range(2)] for probe in probes]

    def success(found: list[list]) -> float:
        flat = [label for labels_ in found for label in labels_]
        return sum(label.kind in ("finished", "answer") for label in flat) / len(flat)

    base, adapted = asyncio.run(sample(f"local/{gguf}@none")), asyncio.run(sample(f"local/{gguf}@{served}"))
    assert success(adapted) < success(base) - 0.05, (success(base), success(adapted))
    # Its failures at the task states fall with an interval below zero (made by hand): only the probes refuse it.
    found = states(24)
    before, after = labels(found, 2), labels(found, 6)
    little = {"general_text": {"drop": 0.0}, "successful_turns": {"drop": 0.0}}
    doc = document(found, {"before": before, "after": after}, probes, {"before": base, "after": adapted})
    promoted, reason = gate({**doc, "forgetting": {"after": little}})
    assert not promoted and "over_calling" in reason
    assert judge({**doc, "forgetting": {"after": little}}, "after")["guards"]["over_calling"]["pass"] is False
