"""`teachback eval`: held-out pairs and forgetting before and after an adapter, the behaviour run
on held-out tasks served by llama.cpp, the paired intervals, and the table and JSON file."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.config import Settings
from agent.protocol import UserInput
from agent.runtime import open_session
from feedback_store import Recorder, open_store
from feedback_store.export.export import export
from tests.conftest import turn

pytest.importorskip("peft")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def reply(name: str, **arguments: str) -> dict:
    return turn(content=json.dumps({"name": name, "arguments": arguments}))


def record_session(db: Path, repo: Path, script: Path) -> None:
    """One real agent session (scripted model, grammar tool mode as the embedded model uses) with
    two failures and their fixes, recorded in `db`."""
    repo.mkdir(parents=True)
    (repo / "app.py").write_text("def greet(name):\n    return 'Hello, ' + name\n")
    subprocess.run(
        "git init -q -b main && git add -A && git -c user.email=a@b -c user.name=a commit -qm init",
        shell=True,
        cwd=repo,
        check=True,
    )
    script.write_text(
        json.dumps(
            [
                reply("open_file", path="app.py"),  # unknown tool
                reply("read_file", path="app.py"),
                reply(
                    "edit_file", path="app.py", old_text="return 'Hi, ' + name", new_text="return f'Hi, {name}'"
                ),  # no match
                reply(
                    "edit_file", path="app.py", old_text="return 'Hello, ' + name", new_text="return f'Hello, {name}'"
                ),
                reply("finish", summary="greet uses an f-string"),
            ]
        )
    )

    async def run() -> None:
        store = open_store(db)
        settings = Settings(model=f"scripted/{script}", tool_mode="grammar", approval="full-auto", repo_map_tokens=0)
        session = open_session(repo, settings, frontend="test")
        session.subscribe(Recorder(store))
        await session.run(UserInput(text="Make greet use an f-string."))
        store.close()

    asyncio.run(run())


@pytest.fixture(scope="module")
def recorded_pairs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's pairs as sdpo records (both on one side: this is held-out data here)."""
    root = tmp_path_factory.mktemp("recorded")
    record_session(root / "feedback.db", root / "proj", root / "script.json")
    out = root / "pairs.jsonl"
    export([root / "feedback.db"], "sdpo", out, tokenizer="estimate")
    return out


def make_adapter(base_dir: Path, out: Path, b_std: float) -> Path:
    """A LoRA adapter on the attention projections; lora_B drawn with `b_std` (0: the identity)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    peft_model = get_peft_model(
        model, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    )
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, b_std)
    peft_model.save_pretrained(out)
    (out / "teachback_train.json").write_text(json.dumps({"base": str(base_dir)}))
    return out


@pytest.mark.real_model
def test_identity_adapter_changes_nothing_and_a_random_one_changes_pairs_and_text(
    recorded_pairs: Path, embedded_model_dir: Path, tmp_path: Path
) -> None:
    from trainer.evaluate import EvalConfig, evaluate, render_table

    same = make_adapter(embedded_model_dir, tmp_path / "identity", 0.0)
    doc = evaluate(EvalConfig(adapter=same, out=tmp_path / "same.json", pairs=[recorded_pairs], behaviour=False))
    assert doc["pairs"]["pairs"] == 2 and doc["pairs"]["tokens"] > 10
    assert doc["pairs"]["divergence"]["before"] == pytest.approx(doc["pairs"]["divergence"]["after"], abs=1e-6)
    text = doc["forgetting"]["general_text"]
    assert text["tokens"] > 800 and text["drop"] == pytest.approx(0.0, abs=1e-6)
    assert -6 < text["before"] < -1  # a real model on English prose: a few nats per token

    changed = make_adapter(embedded_model_dir, tmp_path / "random", 0.3)
    doc = evaluate(EvalConfig(adapter=changed, out=tmp_path / "eval.json", pairs=[recorded_pairs], behaviour=False))
    assert json.loads((tmp_path / "eval.json").read_text()) == json.loads(json.dumps(doc))
    assert doc["forgetting"]["general_text"]["drop"] > 0.05
    pairs = doc["pairs"]
    assert abs(pairs["failed_token_logprob"]["after"] - pairs["failed_token_logprob"]["before"]) > 0.01
    assert doc["forgetting"]["successful_turns"]["tokens"] == 0  # scripted sessions record no token ids
    table = render_table(doc)
    assert "divergence student→teacher" in table and "general text" in table
    assert doc["cpu_s"]["pairs"] > 0


def test_paired_rate_against_hand_computed_values() -> None:
    from trainer.eval_bench import paired_rate

    def rec(task: str, calls: int, errors: int, error: str | None = None) -> dict:
        return {"instance_id": task, "tool_calls": calls, "call_errors": errors, **({"error": error} if error else {})}

    before = [rec("a", 4, 2), rec("b", 6, 3), rec("c", 10, 0), rec("c", 5, 5, error="harness")]
    after = [rec("a", 4, 1), rec("b", 6, 0), rec("c", 10, 0), rec("d", 3, 3)]
    rate = paired_rate(before, after, ("call_errors",), ("tool_calls",), resamples=2000)
    assert rate["tasks"] == 3  # d ran on one side only; the harness error is left out
    assert rate["before"] == pytest.approx(5 / 20) and rate["after"] == pytest.approx(1 / 20)
    assert rate["relative"] == pytest.approx(1 / 5 - 1)
    low, high = rate["diff_ci"]
    assert low <= -0.2 <= high and high <= 0.0  # no resample of these tasks gets worse
    assert rate["relative_ci"][1] <= 0.0


def test_eval_command_runs_held_out_tasks_with_and_without_the_adapter(
    recorded_pairs: Path, tiny_model_dir: Path, tiny_gguf: Path, tmp_path: Path
) -> None:
    """The command's mechanics, on the two-layer model and its GGUF file."""
    from tasks.records import load_tasks
    from tasks.sample_suite import sample_suite_path

    adapter = make_adapter(tiny_model_dir, tmp_path / "adapter", 0.05)
    task = load_tasks(sample_suite_path())[0]
    tasks = tmp_path / "one.jsonl"
    tasks.write_text(task.to_json() + "\n")
    (tmp_path / "snapshots").symlink_to(sample_suite_path().parent / "snapshots")
    out = tmp_path / "eval.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "eval",
            "--adapter",
            str(adapter),
            "--serve",
            str(tiny_gguf),
            "--pairs",
            str(recorded_pairs),
            "--tasks",
            str(tasks),
            "--max-steps",
            "2",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=800,
        # Replies of at most 48 tokens: the random model's replies run to the cap, and each of its
        # tokens is a grammar check over the whole vocabulary.
        env={**os.environ, "TEACHBACK_MAX_TOKENS": "48"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(out.read_text())
    behaviour = doc["behaviour"]
    assert behaviour["models"]["before"] == f"local/{tiny_gguf}@none"
    assert behaviour["models"]["after"] == f"local/{tiny_gguf}@{adapter.resolve()}"
    assert (adapter / "adapter.gguf").is_file()
    for side in ("before", "after"):
        assert behaviour["summary"][side]["attempts"] == 1
    assert set(behaviour["rates"]) >= {"call_error_rate", "repeated_error_rate", "premature_finish_rate", "pass@1"}
    assert "held-out tasks: call-error rate" in done.stdout and "| metric" in done.stdout
    # The task sessions went to scratch databases beside the JSON file, the adapter named in the model.
    for side, model in behaviour["models"].items():
        with open_store(tmp_path / "eval-bench" / f"{side}.db") as store:
            assert [row["model"] for row in store.query("SELECT model FROM sessions")] == [model]
    # Those sessions' token ids make successful turns for the forgetting measure: one per call
    # that succeeded (one call per reply in the grammar mode; the grader's run is not the model's).
    from transformers import AutoTokenizer

    from trainer.evaluate import successful_turns

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    for side in ("before", "after"):
        turns = successful_turns(tmp_path / "eval-bench" / f"{side}.db", 1.0, 100, tokenizer)
        s = behaviour["summary"][side]
        assert len(turns) == s["tool_calls"] - s["call_errors"] - s["failing_test_runs"]
        assert all(len(t.prompt) > 500 and t.completion for t in turns)
