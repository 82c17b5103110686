"""`teachback demo --learn`'s round, end to end on the embedded model at the smallest sizes: attempts
at a training and a held-out task of the sample suite, one branch round, and its report; the
user's served adapter is never touched (the round has its own TEACHBACK_HOME)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from agent.providers.llama_engine import promoted_pointer
from feedback_store.rounds import rounds
from feedback_store.store import open_store
from trainer.demo_learn import run_learn
from trainer.weights import EMBEDDED

TINY = {
    "train_tasks": 2,
    "heldout_tasks": 1,
    "attempts": 1,
    "max_steps": 2,
    "branch_samples": 2,
    "samples": 1,
    "steps": 1,
    "parallel": 1,  # attempts in this process: the pool of processes is tests/tasks/test_rollout.py's
}


@pytest.mark.slow
@pytest.mark.real_model
@pytest.mark.timeout(900)
def test_the_demo_round_runs_end_to_end_and_leaves_the_served_adapter_alone(
    embedded_model_dir: Path, tmp_path: Path
) -> None:
    # The round's own home holds the embedded model converted already, as a user's would after the
    # first round (the conversion itself is tests/train/test_weights.py's).
    models = tmp_path / "learn" / "home" / "models"
    models.mkdir(parents=True)
    (models / EMBEDDED).symlink_to(embedded_model_dir, target_is_directory=True)
    out = io.StringIO()
    assert run_learn(tmp_path, TINY, out) == 0
    text = out.getvalue()
    assert "it measures nothing" in text and "bench/learn_round.py" in text
    assert not promoted_pointer().exists()  # the user's home: no adapter promoted there
    work = tmp_path / "learn"
    assert (work / "train.db").is_file() and (work / "heldout.db").is_file()
    if "training record(s) sampled at the training states" in text:  # no verified success at these sizes
        assert "(need 1)" in text
        return
    with open_store(work / "train.db") as store:
        found = rounds(store)
    assert len(found) == 1 and found[0].reason
    assert Path(found[0].adapter_dir, "adapter.gguf").is_file()
    assert str(work / "home") in found[0].adapter_dir
    # the replay's table: the rule first, failures as the headline, every guard of the gate
    assert "rule: target met:" in text and "FAILURES / sample" in text and "guard premature_finish" in text
    assert found[0].reason in text
