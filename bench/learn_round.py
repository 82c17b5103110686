"""One whole learning round on the embedded model, on a CPU: tasks -> rollouts -> pairs -> train ->
eval. Prints the call-error rate before and after on held-out tasks (with the paired bootstrap
interval), the forgetting figures, and CPU minutes per stage.

The shipped sample suite is split by a seeded shuffle into training tasks (their rollouts, by the
embedded model without an adapter, are recorded and their failures exported as sdpo pairs) and
held-out tasks (never trained on; the agent runs them with and without the adapter). Lessons are
off everywhere, so what changes between the two runs is the model alone. Nothing is promoted.

    .venv/bin/python bench/learn_round.py [--quick] [--work DIR] [--objective sdpo] [--hint feedback]

The default round took 38 minutes on 2 shared cores here (27 CPU minutes: rollouts 6.6, training
2.2, evaluation 18.6, of which the held-out task runs 17.0); --quick (a handful of short attempts
and two optimizer steps) checks that every stage runs, in about 13 minutes, and measures nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch is imported (see tests/train/conftest.py)

MODEL = "local/smollm2@none"
# What the embedded model needs to produce tool calls at all (as in `teachback demo`).
SETTINGS = {
    "TEACHBACK_MAX_TOKENS": "256",
    "TEACHBACK_TEMPERATURE": "0.8",
    "TEACHBACK_REPO_MAP_TOKENS": "256",
    "TEACHBACK_LESSONS": "false",
}
FULL = {
    "train_tasks": 6,
    "train_attempts": 3,
    "heldout_tasks": 6,
    "heldout_attempts": 2,
    "max_steps": 8,
    "epochs": 1.0,
    "steps": None,
}
QUICK = {
    "train_tasks": 3,
    "train_attempts": 1,
    "heldout_tasks": 2,
    "heldout_attempts": 1,
    "max_steps": 3,
    "epochs": 1.0,
    "steps": 2,
}


class Stages:
    """CPU seconds (this process and its children) and wall seconds per stage."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self.wall: dict[str, float] = {}

    def run(self, name: str, work, *args, **kwargs):
        cpu, wall = _cpu(), time.perf_counter()
        print(f"== {name}", file=sys.stderr, flush=True)
        try:
            return work(*args, **kwargs)
        finally:
            self.cpu[name] = _cpu() - cpu
            self.wall[name] = time.perf_counter() - wall


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every stage, minimal sizes (checks it runs)")
    parser.add_argument("--work", type=Path, help="keep everything here (default: a temporary folder)")
    parser.add_argument("--objective", default="sdpo", choices=("sdpo", "sft", "dpo", "mix"))
    parser.add_argument("--hint", default="feedback", choices=("feedback", "demonstration", "hindsight"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parallel", type=int, default=1, help="attempts at once")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL

    from agent.providers.llama_engine import LocalModelError, check_runtime

    try:
        check_runtime("smollm2")
    except LocalModelError as exc:
        print(f"learn round: the embedded model cannot run here: {exc}")
        return 1
    work = args.work or Path(tempfile.mkdtemp(prefix="teachback-learn-round-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ.update(SETTINGS)
    stages = Stages()
    train_file, heldout_file = split_suite(work, sizes, args.seed)
    db = work / "feedback.db"
    records = stages.run("rollouts (training tasks)", rollouts, train_file, db, sizes, args.parallel)
    split = stages.run("export pairs", export_pairs, db, work)
    if "train" not in split:
        print(f"no training pairs from {len(records)} attempts: nothing to train on")
        return 1
    result = stages.run("train", train, split["train"], work / "adapter", sizes, args)
    doc = stages.run("eval", evaluate, work, result.adapter_dir, split.get("test"), db, heldout_file, sizes, args)
    report(doc, records, split, result, stages, sizes, work)
    return 0


def split_suite(work: Path, sizes: dict, seed: int) -> tuple[Path, Path]:
    """Two task files beside the suite's snapshots: training tasks and held-out tasks."""
    from tasks.records import load_tasks
    from tasks.sample_suite import sample_suite_path

    tasks = load_tasks(sample_suite_path())
    random.Random(seed).shuffle(tasks)
    picked = {
        "train": tasks[: sizes["train_tasks"]],
        "heldout": tasks[sizes["train_tasks"] : sizes["train_tasks"] + sizes["heldout_tasks"]],
    }
    folder = work / "tasks"
    folder.mkdir(exist_ok=True)
    if not (folder / "snapshots").exists():
        (folder / "snapshots").symlink_to(sample_suite_path().parent / "snapshots")
    paths = {}
    for name, chosen in picked.items():
        paths[name] = folder / f"{name}.jsonl"
        paths[name].write_text("".join(task.to_json() + "\n" for task in chosen))
    return paths["train"], paths["heldout"]


def rollouts(task_file: Path, db: Path, sizes: dict, parallel: int) -> list[dict]:
    from tasks.executors import ResultsFile, run_all, specs_for
    from tasks.records import load_tasks

    specs = specs_for(
        load_tasks(task_file),
        sizes["train_attempts"],
        task_file=str(task_file),
        model=MODEL,
        db=str(db),
        overrides={"max_steps": sizes["max_steps"]},
    )
    return run_all(
        specs,
        ResultsFile(db.with_suffix(".attempts.jsonl")),
        parallel=parallel,
        on_result=lambda r, n, total: print(
            f"[{n}/{total}] {r['instance_id']}: {r.get('call_errors')} call error(s) in {r.get('tool_calls')} call(s)",
            file=sys.stderr,
            flush=True,
        ),
    )


def export_pairs(db: Path, work: Path) -> dict[str, Path]:
    """sdpo pairs split by session (a fifth held out); when every session with pairs hashed to the
    held-out side (few sessions), all of them train and no pairs are held out."""
    from feedback_store.export import EmptyExport, export

    try:
        result = export([db], "sdpo", work / "pairs.jsonl", test_fraction=0.2, command="bench/learn_round.py")
    except EmptyExport:
        return {}
    split = {p.name.rsplit(".", 2)[-2]: p for p in result.paths}
    if "train" not in split:
        print(
            "every session with pairs is on the held-out side; training on all of them, none held out", file=sys.stderr
        )
        split = {"train": export([db], "sdpo", work / "pairs.all.jsonl", command="bench/learn_round.py").paths[0]}
    return split


def train(data: Path, out: Path, sizes: dict, args: argparse.Namespace):
    from trainer.train import TrainConfig
    from trainer.train import train as run

    config = TrainConfig(
        data=[data],
        out=out,
        objective=args.objective,
        hint=args.hint,
        seed=args.seed,
        steps=sizes["steps"],
        epochs=sizes["epochs"],
    )
    return run(
        config,
        progress=lambda r: print(
            f"step {r.step}/{r.total}: loss {r.loss:.4f}, {r.tokens_per_second:.0f} tokens/s",
            file=sys.stderr,
            flush=True,
        ),
    )


def evaluate(
    work: Path, adapter: Path, test: Path | None, db: Path, heldout: Path, sizes: dict, args: argparse.Namespace
):
    from trainer.evaluate import EvalConfig
    from trainer.evaluate import evaluate as run

    config = EvalConfig(
        adapter=adapter,
        out=work / "eval.json",
        pairs=[test] if test else [],
        db=db,
        tasks=heldout,
        attempts=sizes["heldout_attempts"],
        max_steps=sizes["max_steps"],
        parallel=args.parallel,
        seed=args.seed,
    )
    return run(config, progress=lambda text: print(text, file=sys.stderr, flush=True))


def report(doc: dict, records: list[dict], split: dict, result, stages: Stages, sizes: dict, work: Path) -> None:
    from trainer.evaluate import render_table

    pairs = {name: sum(1 for _ in path.open()) for name, path in split.items()}
    print(f"\nlearning round on the embedded model ({'quick' if sizes is QUICK else 'full'}): {sizes}")
    print(f"rollouts: {len(records)} attempts on training tasks -> pairs {pairs}")
    losses = result.losses
    print(
        f"training: {result.steps} steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
        f"{result.tokens_per_second:.0f} tokens/s\n"
    )
    print(render_table(doc))
    rate = (doc.get("behaviour") or {}).get("rates", {}).get("call_error_rate")
    if rate and rate.get("relative") is not None:
        low, high = rate["relative_ci"]
        print(
            f"\ncall-error rate on held-out tasks: {rate['before']:.3f} -> {rate['after']:.3f} "
            f"({rate['relative']:+.0%}; 95% CI {low:+.0%} to {high:+.0%}; target: -30% or better)"
        )
    forgetting = doc.get("forgetting") or {}
    for key, value in forgetting.items():
        if "drop" in value:
            print(f"forgetting, {key.replace('_', ' ')}: {value['drop']:+.4f} nats/token over {value['tokens']} tokens")
    print("\nCPU minutes per stage (this process and its children; wall minutes in brackets):")
    for name, seconds in stages.cpu.items():
        print(f"  {name:28} {seconds / 60:6.1f}  ({stages.wall[name] / 60:.1f})")
        if name == "eval":
            for part, cpu in doc.get("cpu_s", {}).items():
                print(f"    {part:26} {cpu / 60:6.1f}  ({doc['wall_s'][part] / 60:.1f})")
    (work / "round.json").write_text(
        json.dumps(
            {"sizes": sizes, "pairs": pairs, "cpu_s": stages.cpu, "wall_s": stages.wall, "losses": losses}, indent=2
        )
    )
    print(f"\neverything is in {work}")


if __name__ == "__main__":
    raise SystemExit(main())
