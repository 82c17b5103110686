"""`teachback demo --learn`: after the demo, one short learning round on what the bundled sample
suite records, and the before/after table at held-out states.

The suite's tasks are split by a seeded shuffle: the embedded model attempts the training tasks
and the held-out tasks once each (two databases beside the demo's), then `teachback learn` runs
one branch round (trainer.learn): replies sampled and labelled at the training states, an adapter
trained on them, the held-out states replayed with and without it under the same seeds, the gate.
The round runs under its own TEACHBACK_HOME inside the demo's folder, so the demo never changes
the adapter the user's agent serves. A round this small shows the loop close; it measures nothing
(`bench/learn_round.py` is the measured round).
"""

from __future__ import annotations

import importlib.util
import random
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from common.environment import environment

MODEL = "local/smollm2@none"
# What the embedded model needs to produce tool calls at all (as in `teachback demo`).
SETTINGS = {
    "TEACHBACK_MAX_TOKENS": "256",
    "TEACHBACK_TEMPERATURE": "0.8",
    "TEACHBACK_REPO_MAP_TOKENS": "256",
    "TEACHBACK_LESSONS": "false",
}
SIZES = {
    "train_tasks": 4,
    "heldout_tasks": 4,
    "attempts": 1,
    "max_steps": 4,
    "branch_samples": 4,
    "samples": 2,
    "steps": 12,
    "parallel": 2,
}


def run_learn(folder: Path, sizes: dict[str, int] | None = None, out: TextIO = sys.stdout) -> int:
    """The round in `folder`/learn; 0 when it ran (promoted or kept), 1 when it could not."""
    sizes = {**SIZES, **(sizes or {})}

    def say(text: str) -> None:
        print(text, file=out, flush=True)

    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("peft") is None:
        say("teachback demo --learn: training needs the `train` extra: pip install 'teachback[train]'")
        return 1
    from agent.providers.llama_engine import LocalModelError, check_runtime

    try:
        check_runtime("smollm2")
    except LocalModelError as exc:
        say(f"teachback demo --learn: the embedded model cannot run here: {exc}")
        return 1
    work = (folder / "learn").resolve()
    work.mkdir(parents=True, exist_ok=True)
    times: dict[str, float] = {}
    say(
        f"\nteachback demo --learn: one short learning round in {work} "
        f"({sizes['train_tasks']} training and {sizes['heldout_tasks']} held-out tasks of the sample suite). "
        "A round this small shows the loop close; it measures nothing: bench/learn_round.py is the measured round."
    )
    with environment({**SETTINGS, "TEACHBACK_HOME": str(work / "home")}):
        train_file, heldout_file, all_file = _split(work, sizes)
        started = time.perf_counter()
        for name, path in (("training", train_file), ("held-out", heldout_file)):
            say(f"== attempts at the {name} tasks")
            _rollouts(path, work / f"{'train' if name == 'training' else 'heldout'}.db", sizes, say)
        times["attempts"] = time.perf_counter() - started
        outcome = _round(work, all_file, sizes, say)
        times["round"] = time.perf_counter() - started - times["attempts"]
    _report(outcome, times, work, say)
    return 0


def _split(work: Path, sizes: dict[str, int]) -> tuple[Path, Path, Path]:
    from tasks.records import load_tasks
    from tasks.sample_suite import sample_suite_path

    tasks = load_tasks(sample_suite_path())
    random.Random(0).shuffle(tasks)
    train, heldout = tasks[: sizes["train_tasks"]], tasks[sizes["train_tasks"] :][: sizes["heldout_tasks"]]
    folder = work / "tasks"
    folder.mkdir(exist_ok=True)
    if not (folder / "snapshots").exists():
        (folder / "snapshots").symlink_to(sample_suite_path().parent / "snapshots")
    files = []
    for name, chosen in (("train", train), ("heldout", heldout), ("all", train + heldout)):
        path = folder / f"{name}.jsonl"
        path.write_text("".join(task.to_json() + "\n" for task in chosen))
        files.append(path)
    return files[0], files[1], files[2]


def _rollouts(task_file: Path, db: Path, sizes: dict[str, int], say: Any) -> None:
    from tasks.executors import ResultsFile, run_all, specs_for
    from tasks.records import load_tasks

    specs = specs_for(
        load_tasks(task_file),
        sizes["attempts"],
        task_file=str(task_file),
        model=MODEL,
        db=str(db),
        overrides={"max_steps": sizes["max_steps"]},
    )
    run_all(
        specs,
        ResultsFile(db.with_suffix(".attempts.jsonl")),
        parallel=sizes["parallel"],
        on_result=lambda r, n, total: say(
            f"  [{n}/{total}] {r['instance_id']}: {r.get('call_errors')} call error(s) in {r.get('tool_calls')} call(s)"
        ),
    )


def _round(work: Path, all_file: Path, sizes: dict[str, int], say: Any) -> Any:
    from trainer.learn import LearnConfig, learn

    say("== one learning round: branches at the training states, train, replay the held-out states, gate")
    return learn(
        LearnConfig(
            db=work / "train.db",
            states=work / "heldout.db",
            tasks=all_file,
            samples=sizes["samples"],
            branch_samples=sizes["branch_samples"],
            min_pairs=1,
            train_options={"steps": sizes["steps"]},
        ),
        say=lambda text: say(f"  {text}"),
    )


def _report(outcome: Any, times: dict[str, float], work: Path, say: Any) -> None:
    from tasks.state_eval import render

    evaluation = outcome.evaluation or {}
    say("")
    if evaluation.get("states"):
        say(render(evaluation["states"]))
    for key, value in (evaluation.get("forgetting") or {}).items():
        if "drop" in value:
            say(f"forgetting, {key.replace('_', ' ')}: {value['drop']:+.4f} nats/token over {value['tokens']} tokens")
    moved = (evaluation.get("shift") or {}).get("mean_kl")
    if moved is not None:
        say(f"how far the adapter moved: mean KL {moved:.4f} nats/token along the held-out recorded replies")
    say(f"\n{outcome.message}")
    say(
        f"attempts {times['attempts'] / 60:.1f} min, round {times['round'] / 60:.1f} min; everything is in {work} "
        f"(the round's adapter and pointer in {work / 'home'}: the agent you use is unchanged)."
    )
