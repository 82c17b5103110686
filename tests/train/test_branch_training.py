"""Training on branch records (tasks.branches): each objective lowers its own loss on verified data
(sft on successes, dpo with its NLL term on same-state pairs, sdpo with a same-state success as the
teacher's demonstration), and the gap filter leaves out the sdpo pairs whose teacher finds the
failed reply at least as likely as the student does."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tasks.branches import At, Branch, build_records
from tasks.states import Label
from trainer.data import read_records
from trainer.train import TrainConfig, TrainError, _filter_by_gap, train

SYSTEM = (
    "You are a coding agent working in the repository `textkit`. Call one tool per reply, as a JSON object "
    '{"name": ..., "arguments": {...}}. Tools: read_file(path), list_files(path), finish(summary).'
)
GOOD = [
    '{ "name": "read_file", "arguments": { "path": "textkit/words.py" } }',
    '{ "name": "read_file", "arguments": { "path": "textkit/slug.py" } }',
    '{ "name": "list_files", "arguments": { "path": "textkit" } }',
]
BAD = [
    '{ "name": "read_file", "arguments": { "path": "/tmp/t14/words.py" } }',
    '{ "name": "list_files", "arguments": { "path": "textkit/words.py" } }',
    '{ "name": "read_file", "arguments": { "path": "words" } }',
]


def branch_files(folder: Path) -> dict[str, Path]:
    """The sft, dpo and sdpo files tasks.branches writes for three states of two sessions: at
    each state one verified success and one failure (ids left out: rendered by the template)."""
    out: dict[str, list[dict[str, Any]]] = {"sft": [], "dpo": [], "sdpo": []}
    for number, (good, bad) in enumerate(zip(GOOD, BAD, strict=True)):
        prompt = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Task {number}: make the tests of textkit pass."},
        ]
        branches = [
            Branch(0, Label("ok", ("read_file",)), prompt, good),
            Branch(1, Label("not_found", ("read_file",)), prompt, bad),
        ]
        for kind, records in build_records(At(f"s{number % 2}", number, f"task-{number}"), branches).items():
            out[kind] += records
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for kind, records in out.items():
        paths[kind] = folder / f"{kind}.jsonl"
        paths[kind].write_text("".join(json.dumps(r) + "\n" for r in records))
    return paths


def test_branch_files_are_read_as_training_records(tmp_path: Path) -> None:
    paths = branch_files(tmp_path)
    formats = Counter(r["format"] for r in read_records(list(paths.values())))
    assert formats == {"teachback-branch-sft-1": 3, "teachback-branch-dpo-1": 3, "teachback-branch-sdpo-1": 3}


@pytest.mark.parametrize("objective", ["sft", "dpo", "sdpo"])
def test_each_objective_lowers_its_own_loss_on_verified_branch_data(
    objective: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    paths = branch_files(tmp_path / "data")
    result = train(
        TrainConfig(
            data=[paths[objective]],
            out=tmp_path / objective,
            objective=objective,
            base=str(tiny_model_dir),
            steps=12,
            lr=3e-3,
            batch_size=3,
            gap_filter=False,  # the random model's gaps have either sign; the filter is tested below
        )
    )
    assert result.metrics["pairs"] == 3
    first, last = result.losses[0], result.losses[-1]
    assert last < 0.8 * first, result.losses


def test_mix_on_branch_records_adds_sft_on_the_demonstration_and_is_not_sdpo(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    """An sdpo branch record carries a verified success at its state (the teacher's demonstration):
    that is mix's correction, so mix trains sft on it beside the distillation. (It once read no
    correction there, and trained byte for byte what sdpo trained.)"""
    paths = branch_files(tmp_path / "data")
    common = {"data": [paths["sdpo"]], "base": str(tiny_model_dir), "steps": 2, "batch_size": 3, "gap_filter": False}
    sdpo = train(TrainConfig(out=tmp_path / "sdpo", objective="sdpo", **common))
    mix = train(TrainConfig(out=tmp_path / "mix", objective="mix", **common))
    sft_only = train(TrainConfig(out=tmp_path / "sft", objective="sft", **common))
    assert sdpo.metrics["pairs"] == mix.metrics["pairs"] == sft_only.metrics["pairs"] == 3
    # mix's first loss is the even blend of the two terms on the same untrained model
    assert mix.losses[0] == pytest.approx(0.5 * sdpo.losses[0] + 0.5 * sft_only.losses[0], rel=1e-4)
    assert mix.losses[0] != pytest.approx(sdpo.losses[0], rel=1e-3)


def test_dpo_with_its_nll_term_raises_the_chosen_replies_likelihood(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The NLL term on the chosen side: its loss is the DPO loss plus the chosen reply's NLL, so it
    starts above plain DPO's (whose first loss is log 2 exactly: policy = reference)."""
    paths = branch_files(tmp_path / "data")
    common = {"data": [paths["dpo"]], "objective": "dpo", "base": str(tiny_model_dir), "steps": 1, "batch_size": 3}
    plain = train(TrainConfig(out=tmp_path / "plain", dpo_nll=0.0, **common))
    with_nll = train(TrainConfig(out=tmp_path / "nll", dpo_nll=1.0, **common))
    assert plain.losses[0] == pytest.approx(0.693147, abs=1e-4)
    assert with_nll.losses[0] > plain.losses[0] + 1.0  # a random model's NLL per token is several nats


@dataclass(frozen=True)
class Pair:
    id: str
    chosen: str | None = None
    distil: bool = True


class Gaps:
    """An objective whose base gaps are given."""

    def __init__(self, gaps: dict[str, float]) -> None:
        self.gaps = gaps

    def base_gap(self, example: Pair) -> float:
        return self.gaps[example.id]


def test_the_gap_filter_drops_exactly_the_pairs_of_the_wrong_sign() -> None:
    left_out: Counter[str] = Counter()
    pairs = [Pair(name) for name in "abcd"]
    kept, summary = _filter_by_gap(Gaps({"a": -0.4, "b": 0.0, "c": 0.7, "d": -0.01}), pairs, left_out)
    assert [p.id for p in kept] == ["a", "d"]
    assert summary["checked"] == 4 and summary["dropped"] == 2 and summary["dropped_ids"] == ["b", "c"]
    assert summary["mean_base_gap"] == pytest.approx((-0.4 + 0.0 + 0.7 - 0.01) / 4)
    assert sum(left_out.values()) == 2 and "wrong sign" in next(iter(left_out))
    with pytest.raises(TrainError, match="wrong sign.*--objective sft"):
        _filter_by_gap(Gaps({"x": 0.2}), [Pair("x")], Counter())


def test_under_mix_a_left_out_pair_with_a_correction_keeps_only_its_sft_term() -> None:
    pairs = [Pair("a", chosen="fix"), Pair("b", chosen="fix"), Pair("c")]
    gaps = Gaps({"a": -0.3, "b": 0.5, "c": 0.5})
    kept, summary = _filter_by_gap(gaps, pairs, Counter(), mix=True)
    assert [(p.id, p.distil) for p in kept] == [("a", True), ("b", False)]
    assert summary["dropped_ids"] == ["b", "c"]
    kept, _ = _filter_by_gap(gaps, pairs, Counter())
    assert [p.id for p in kept] == ["a"]


@pytest.mark.slow
@pytest.mark.real_model
@pytest.mark.timeout(600)
def test_a_teacher_shown_the_failure_itself_as_its_demonstration_is_left_out(
    embedded_model_dir: Path, tmp_path: Path
) -> None:
    """With the embedded model: a pair whose demonstration is the failed reply itself makes the
    teacher copy it (a positive gap) and is dropped before training; the same failure shown a
    different, working reply is kept or dropped by the sign of its own measured gap, never by its
    position in the file."""
    paths = branch_files(tmp_path / "data")
    records = [json.loads(line) for line in paths["sdpo"].read_text().splitlines()]
    copied = {**records[0], "id": "copied", "demonstration": records[0]["completion"]}
    data = tmp_path / "mixed.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in [copied, *records]))
    result = train(
        TrainConfig(
            data=[data], out=tmp_path / "out", objective="sdpo", base=str(embedded_model_dir), steps=1, batch_size=1
        )
    )
    gap = result.metrics["gap_filter"]
    assert gap["checked"] == 4
    assert "copied" in gap["dropped_ids"]
    assert result.metrics["pairs"] == 4 - gap["dropped"]
    assert sum(n for reason, n in result.metrics["left_out"].items() if "wrong sign" in reason) == gap["dropped"]
