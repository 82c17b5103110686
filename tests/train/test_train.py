"""`teachback train` on recorded pairs of the embedded model: the loss goes down, the same seed gives
the same losses, a killed run resumes to the same losses, every objective trains, and the cached
prefix is exact where the trainer relies on it.

The data is one recorded session of local/smollm2 (two pairs, one with a correction: a call that
succeeded after the failure; the ids the model was fed and sampled and their log-probabilities),
exported as sdpo records by bench/record_demo_pairs.py. Windows and
completions are kept short so that a step runs in seconds on two cores. The loss going down is
shown on the embedded model itself; the mechanics (seeds, resume, processes, objectives, caches) on
a two-layer model with its tokenizer (`tiny_model_dir`).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trainer.data import Example, TrainError, epoch_order, read_records
from trainer.train import TrainConfig, train

DEMO = Path(__file__).parent / "data" / "demo_pairs.jsonl"
SMALL = {"max_tokens": 48, "max_completion_tokens": 16, "lr": 2e-3, "checkpoint_every": 1}


def config(model_dir: Path, out: Path, **changes: Any) -> TrainConfig:
    return TrainConfig(data=[DEMO], out=out, base=str(model_dir), **{**SMALL, "batch_size": 2, "steps": 3, **changes})


@pytest.fixture(scope="module")
def reference(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Three steps of two pairs each (the session's pairs wrap around into a second epoch)."""
    return train(config(tiny_model_dir, tmp_path_factory.mktemp("reference") / "adapter"))


@pytest.mark.slow
@pytest.mark.real_model
@pytest.mark.timeout(1200)
def test_a_few_steps_on_recorded_demo_pairs_lower_the_training_loss(embedded_model_dir: Path, tmp_path: Path) -> None:
    reports = []
    result = train(config(embedded_model_dir, tmp_path / "adapter", batch_size=3, steps=4), progress=reports.append)
    assert len(result.losses) == 4 and result.losses[-1] < result.losses[0] and all(map(math.isfinite, result.losses))
    assert [r.step for r in reports] == [1, 2, 3, 4] and reports[-1].loss == result.losses[-1]
    names = {p.name for p in result.adapter_dir.iterdir()}
    assert {"adapter_config.json", "adapter_model.safetensors", "teachback_train.json"} <= names
    assert "checkpoints" not in names  # removed once the adapter is written
    saved = json.loads((result.adapter_dir / "teachback_train.json").read_text())
    assert saved["data_hash"].startswith("sha256:") and saved["config"]["objective"] == "sdpo"
    assert saved["result"]["losses"] == result.losses and result.tokens_per_second > 0


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_same_seed_gives_the_same_losses(reference: Any, tiny_model_dir: Path, tmp_path: Path) -> None:
    again = train(config(tiny_model_dir, tmp_path / "again"))
    assert again.losses == reference.losses
    other = train(config(tiny_model_dir, tmp_path / "other", seed=1, steps=2))
    assert other.losses != reference.losses[:2]  # another LoRA initialisation (and order)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_killed_run_resumes_from_its_checkpoint_to_the_same_losses(
    reference: Any, tiny_model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "adapter"
    # The process kills itself with SIGKILL the moment its first checkpoint is on disk: on the small
    # test model the whole run takes less time than any watcher outside the process could react in.
    killed_after_first_checkpoint = (
        "import os, signal, sys\n"
        "from trainer import checkpoints\n"
        "save = checkpoints.save\n"
        "def save_then_die(*args, **kwargs):\n"
        "    save(*args, **kwargs)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "checkpoints.save = save_then_die\n"
        "from cli.entry import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    args = [
        sys.executable,
        "-c",
        killed_after_first_checkpoint,
        "train",
        "--data",
        str(DEMO),
        "--out",
        str(out),
        "--base",
        str(tiny_model_dir),
        "--batch-size",
        "2",
        "--steps",
        "3",
        "--max-tokens",
        "48",
        "--max-completion-tokens",
        "16",
        "--lr",
        "2e-3",
        "--checkpoint-every",
        "1",
    ]
    run = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ}, timeout=900)
    assert run.returncode == -signal.SIGKILL, run.stderr.decode()[-2000:]
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["step-000001.pt"]
    assert not (out / "teachback_train.json").exists()  # it was killed before the end

    resumed = train(config(tiny_model_dir, out))
    assert resumed.losses[0] == reference.losses[0]  # read back from the checkpoint
    assert resumed.losses == pytest.approx(reference.losses, rel=1e-4)  # computed again after the kill
    assert train(config(tiny_model_dir, out)).losses == resumed.losses  # finished: nothing to do


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_two_processes_of_one_pair_each_train_as_one_process_of_two_pairs(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The command as documented for several CPU processes (on GPUs: accelerate launch --multi_gpu)."""
    tiny = {"max_tokens": 16, "max_completion_tokens": 8, "steps": 2}
    single = train(config(tiny_model_dir, tmp_path / "single", batch_size=2, **tiny))
    torchrun = Path(sys.executable).with_name("torchrun")
    args = [
        str(torchrun),
        "--nproc_per_node",
        "2",
        "-m",
        "trainer",
        "train",
        "--data",
        str(DEMO),
        "--out",
        str(tmp_path / "two"),
        "--base",
        str(tiny_model_dir),
        "--batch-size",
        "1",
        "--steps",
        "2",
        "--max-tokens",
        "16",
        "--max-completion-tokens",
        "8",
        "--lr",
        "2e-3",
        "--json",
    ]
    done = subprocess.run(
        args, capture_output=True, text=True, timeout=1000, env={**os.environ, "ACCELERATE_USE_CPU": "1"}
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == 2  # one per process, each reporting the losses averaged over both
    for result in results:
        assert result["losses"] == pytest.approx(single.losses, rel=1e-4)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_each_objective_and_the_ema_teacher_train_a_step(reference: Any, tiny_model_dir: Path, tmp_path: Path) -> None:
    def first_loss(**changes: Any) -> float:
        name = "-".join(f"{k}{v}" for k, v in changes.items())
        return train(config(tiny_model_dir, tmp_path / name, steps=1, **changes)).losses[0]

    # At the first step the adapter adds nothing: the policy is the reference, the margin is 0.
    assert first_loss(objective="dpo", dpo_nll=0.0) == pytest.approx(math.log(2), abs=1e-5)
    sft = first_loss(objective="sft")
    assert sft > 0
    # By default DPO adds the correction's NLL, which at the first step is the sft loss on the same batch.
    assert first_loss(objective="dpo") == pytest.approx(math.log(2) + sft, rel=1e-4)
    # An EMA of the student starts where the student does, which is the base model.
    assert first_loss(teacher="ema") == pytest.approx(reference.losses[0], rel=1e-4)
    mixed = first_loss(objective="mix", mix_sft=0.5)
    assert math.isfinite(mixed) and mixed != reference.losses[0]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_cached_prefix_and_the_window_are_exact_at_the_start(tiny_model_dir: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model

    from trainer.render import render
    from trainer.scoring import PrefixCache, base_weights, completion_logits, load, teacher_logits, window_start

    model, tokenizer = load(str(tiny_model_dir))
    model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    rendered = render(read_records([DEMO])[0], tokenizer)
    completion = rendered.completion[:8]
    prefix = PrefixCache(model)
    with torch.no_grad():
        cached = teacher_logits(model, prefix, rendered, completion)
        with base_weights(model):
            whole = completion_logits(model, rendered.teacher + completion, len(completion))
        start = window_start(rendered, completion, 24)
        assert 0 < start < rendered.shared and prefix.ids == rendered.teacher[: rendered.shared]
        windowed = completion_logits(model, rendered.prompt + completion, len(completion), prefix.view(start), start)
        student = completion_logits(model, rendered.prompt + completion, len(completion))
    assert torch.allclose(cached, whole, atol=1e-3) and torch.allclose(windowed, student, atol=1e-3)
    assert prefix.computed == rendered.shared  # each prefix token ran once


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_pairs_of_one_session_compute_their_shared_prefix_once_in_any_order(tiny_model_dir: Path) -> None:
    import torch

    from trainer.render import render
    from trainer.scoring import PrefixCache, base_weights, completion_logits, load, teacher_logits

    model, tokenizer = load(str(tiny_model_dir))
    first, second = (render(record, tokenizer) for record in read_records([DEMO]))
    # the later pair's prompt extends the earlier's
    assert first.teacher[: first.shared] == second.teacher[: first.shared]
    prefix = PrefixCache(model)
    with torch.no_grad():
        for rendered in (second, first, second, first):  # as batches that wrap around visit them
            cached = teacher_logits(model, prefix, rendered, rendered.completion[:4])
            with base_weights(model):
                whole = completion_logits(model, rendered.teacher + rendered.completion[:4], 4)
            assert torch.allclose(cached, whole, atol=1e-3)
    assert prefix.computed == second.shared  # the longer prefix held, the shorter read from it


def test_settings_out_of_range_are_refused_before_anything_loads(tmp_path: Path) -> None:
    bad = TrainConfig(data=[DEMO], out=tmp_path, objective="ppo", alpha=2.0, top_k=0, hint="oracle")
    with pytest.raises(TrainError) as caught:
        train(bad)
    message = str(caught.value)
    assert "--objective must be one of sdpo, sft, dpo, mix" in message and "--alpha must be between 0" in message
    assert "--top-k must be at least 1" in message and "--hint must be one of" in message


def test_only_sdpo_exports_are_read(tmp_path: Path) -> None:
    dpo = tmp_path / "dpo.jsonl"
    dpo.write_text(json.dumps({"format": "teachback-dpo-2", "prompt": [], "chosen": [], "rejected": []}) + "\n")
    with pytest.raises(TrainError, match="not an sdpo record.*--format sdpo"):
        read_records([dpo])
    with pytest.raises(TrainError, match="no data file"):
        read_records([tmp_path / "missing.jsonl"])


def test_the_order_shuffles_sessions_and_keeps_each_sessions_pairs_together_in_order() -> None:
    examples = [Example(f"{s}{i}", s, None, [1], None, None) for s in "abcdef" for i in range(3)]  # type: ignore[arg-type]
    orders = {seed: [e.id for e in epoch_order(examples, seed, 0)] for seed in range(4)}
    for ids in orders.values():
        sessions = [i[0] for i in ids]
        assert all(sessions[k : k + 3] == [sessions[k]] * 3 for k in range(0, 18, 3))  # together
        assert all(ids[k : k + 3] == [f"{ids[k][0]}{i}" for i in range(3)] for k in range(0, 18, 3))  # in order
    assert len(set(map(tuple, orders.values()))) > 1  # the seed decides the sessions' order
    assert [e.id for e in epoch_order(examples, 0, 0)] == orders[0]
    assert [e.id for e in epoch_order(examples, 0, 1)] != orders[0]  # each epoch its own order
