"""One learning round on the embedded model, on a CPU, judged at held-out states: rollouts ->
states -> branches -> train (sft, dpo, sdpo, in one run) -> state replay of every arm.

The bundled sample suite is split by a seeded shuffle into training tasks and held-out tasks;
`--heldout-tasks FILE` adds the tasks of other repositories (made with `teachback tasks synth`),
never trained on. The base model (no adapter) attempts the training tasks; at their recorded
states it draws K more replies each, labelled by running them (tasks.branches), which become the
training data of every objective: sft on the verified successes, dpo on same-state success/failure
pairs (with an NLL term on the chosen side), sdpo on the failures with a same-state success as the
teacher's demonstration (pairs whose base teacher-student gap is not negative left out). The base
also attempts the held-out tasks; their states, frozen before training, are replayed with the base
and with each adapter under the same seeds (tasks.state_eval). Lessons are off everywhere.

The rule, fixed before the run and printed before the results: *shown* when the relative change
in call errors per sample at held-out states is at most -30% and its 95% interval (tasks resampled)
lies below zero; *refuted* when the interval's lower end is above -30%; otherwise *inconclusive*.
Every arm is reported, with forgetting (general text, held-out successful turns), how far the
adapter moved (mean KL between base and adapter along held-out recorded replies), the tool mix,
the finish share, the no-tool probes and the gate's verdict.

    .venv/bin/python bench/learn_round.py [--quick] [--work DIR] [--heldout-tasks FILE ...] [--size KEY=N ...] [--json]

--quick runs every stage at minimal sizes (it checks that the round runs, and measures nothing).
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
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch is imported (see tests/conftest.py)

MODEL = "local/smollm2@none"
OBJECTIVES = ("sft", "dpo", "sdpo")
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
    "heldout_attempts": 4,
    "extra_attempts": 3,  # per task of a --heldout-tasks file
    "max_steps": 8,
    "states_per_session": 6,
    "eval_states_per_session": 3,
    "probes": 12,
    "branch_samples": 6,
    "eval_samples": 1,
    "eval_sessions": 0,  # held-out sessions replayed, one per task in turn (seeded); 0: all
    "steps": 12,
    "batch_size": 6,
    "lr": 5e-4,
}
QUICK = {
    "train_tasks": 2,
    "train_attempts": 1,
    "heldout_attempts": 1,
    "extra_attempts": 1,
    "max_steps": 2,
    "states_per_session": 2,
    "eval_states_per_session": 2,
    "probes": 2,
    "branch_samples": 2,
    "eval_samples": 1,
    "eval_sessions": 0,
    "steps": 1,
    "batch_size": 2,
    "lr": 5e-4,
}
RULE = (
    "shown: relative change in call errors per sample <= -30% and its 95% interval below zero; "
    "refuted: the interval's lower end above -30%; otherwise inconclusive"
)


class Stages:
    """CPU seconds (this process and its children) and wall seconds per stage."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self.wall: dict[str, float] = {}

    def run(self, name: str, work, *args, **kwargs):
        cpu, wall = _cpu(), time.perf_counter()
        say(f"== {name}")
        try:
            return work(*args, **kwargs)
        finally:
            self.cpu[name] = self.cpu.get(name, 0.0) + _cpu() - cpu
            self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - wall


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every stage, minimal sizes (checks it runs)")
    parser.add_argument(
        "--work", type=Path, help="keep everything here, and resume there (default: a temporary folder)"
    )
    parser.add_argument(
        "--heldout-tasks",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="tasks of another repository (teachback tasks synth output), held out with the suite's",
    )
    parser.add_argument("--objectives", default=",".join(OBJECTIVES), help="comma-separated, of sft,dpo,sdpo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parallel", type=int, default=2, help="task attempts at once")
    parser.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="KEY=N",
        help=f"change one size of the round (of {', '.join(FULL)}); the report prints the sizes used",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON document")
    args = parser.parse_args()
    sizes = dict(QUICK if args.quick else FULL)
    for item in args.size:
        key, _, value = item.partition("=")
        if key not in FULL:
            parser.error(f"--size {item}: the sizes are {', '.join(FULL)}")
        try:
            sizes[key] = type(FULL[key])(value)
        except ValueError:
            parser.error(f"--size {item}: {key} takes a {type(FULL[key]).__name__}")
    objectives = [o for o in args.objectives.split(",") if o]
    if not objectives or set(objectives) - set(OBJECTIVES):
        parser.error(f"--objectives takes some of {','.join(OBJECTIVES)}")

    from agent.providers.llama_engine import LocalModelError, check_runtime

    try:
        gguf = check_runtime("smollm2")
    except LocalModelError as exc:
        print(f"learn round: the embedded model cannot run here: {exc}")
        return 1
    work = (args.work or Path(tempfile.mkdtemp(prefix="teachback-learn-round-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    os.environ.update(SETTINGS)
    say(f"rule (fixed before the run): {RULE}")
    stages = Stages()
    train_file, heldout_files = split_suite(work, sizes, args.seed, args.heldout_tasks)
    train_db, heldout_db = work / "train.db", work / "heldout.db"
    stages.run("rollouts: training tasks", rollouts, train_file, train_db, sizes["train_attempts"], sizes, args)
    for name, path in heldout_files.items():
        attempts = sizes["heldout_attempts"] if name == "suite" else sizes["extra_attempts"]
        stages.run("rollouts: held-out tasks", rollouts, path, heldout_db, attempts, sizes, args)
    heldout_tasks = stages.run("held-out states", merge_tasks, heldout_files, work / "tasks" / "heldout-all.jsonl")
    branches = stages.run("branches", branch, train_db, train_file, work / "branches", sizes)
    adapters: dict[str, Any] = {}
    for objective in objectives:
        adapters[objective] = stages.run(
            f"train {objective}", train, objective, branches.paths, work / f"adapter-{objective}", sizes, args
        )
    for result in adapters.values():
        ensure_gguf(result.adapter_dir, gguf)
    replay = stages.run("replay held-out states", replay_arms, heldout_db, heldout_tasks, adapters, gguf, sizes, args)
    checks = stages.run("forgetting and shift", forgetting_and_shift, adapters, heldout_db)
    doc = document(sizes, args, branches, adapters, replay, checks, stages, heldout_files)
    (work / "round.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
    else:
        print(report(doc))
        print(f"\neverything is in {work}")
    return 0


def split_suite(work: Path, sizes: dict, seed: int, extra: list[Path]) -> tuple[Path, dict[str, Path]]:
    """The training tasks (a seeded share of the sample suite) and the held-out task files: the
    suite's other tasks, and each --heldout-tasks file as it is."""
    from tasks.records import load_tasks
    from tasks.sample_suite import sample_suite_path

    tasks = load_tasks(sample_suite_path())
    random.Random(seed).shuffle(tasks)
    folder = work / "tasks"
    folder.mkdir(exist_ok=True)
    if not (folder / "snapshots").exists():
        (folder / "snapshots").symlink_to(sample_suite_path().parent / "snapshots")
    train_file, suite_file = folder / "train.jsonl", folder / "heldout.jsonl"
    train_file.write_text("".join(t.to_json() + "\n" for t in tasks[: sizes["train_tasks"]]))
    suite_file.write_text("".join(t.to_json() + "\n" for t in tasks[sizes["train_tasks"] :]))
    files = {"suite": suite_file}
    for path in extra:
        files[path.resolve().parent.name or path.stem] = path.resolve()
    return train_file, files


def rollouts(task_file: Path, db: Path, attempts: int, sizes: dict, args: argparse.Namespace) -> list[dict]:
    from tasks.executors import ResultsFile, run_all, specs_for
    from tasks.records import load_tasks

    specs = specs_for(
        load_tasks(task_file),
        attempts,
        task_file=str(task_file),
        model=MODEL,
        db=str(db),
        overrides={"max_steps": sizes["max_steps"]},
    )
    return run_all(
        specs,
        ResultsFile(db.with_name(f"{db.stem}.{task_file.stem}.attempts.jsonl")),
        parallel=args.parallel,
        on_result=lambda r, n, total: say(
            f"[{n}/{total}] {r['instance_id']}: {r.get('call_errors')} call error(s) in {r.get('tool_calls')} call(s)"
        ),
    )


def merge_tasks(files: dict[str, Path], out: Path) -> Path:
    """One task file of every held-out task (the replay reads one); each task keeps its own
    snapshot path, made absolute so that it resolves from here."""
    from tasks.records import load_tasks

    lines = []
    for path in files.values():
        for task in load_tasks(path):
            record = json.loads(task.to_json())
            for key in ("snapshot", "gold_patch"):
                if record.get(key) and not Path(record[key]).is_absolute():
                    record[key] = str((path.parent / record[key]).resolve())
            lines.append(json.dumps(record))
    out.write_text("".join(line + "\n" for line in lines))
    return out


def branch(db: Path, task_file: Path, out: Path, sizes: dict):
    """The branch records (kept in `out` with a summary: a rerun in the same --work reuses them)."""
    from collections import Counter

    from tasks.branches import BranchConfig, BranchResult, render_summary, run_branches

    done = out / "summary.json"
    if done.is_file():
        saved = json.loads(done.read_text())
        return BranchResult(
            states=saved["states"],
            samples=saved["samples"],
            labels=Counter(saved["labels"]),
            records=saved["records"],
            paths={k: Path(v) for k, v in saved["paths"].items()},
            wall_s=saved["wall_s"],
        )
    result = run_branches(
        BranchConfig(
            db=db,
            out=out,
            task_file=task_file,
            model=MODEL,
            samples=sizes["branch_samples"],
            max_per_session=sizes["states_per_session"],
        ),
        say,
    )
    say(render_summary(result))
    summary = {
        "states": result.states,
        "samples": result.samples,
        "labels": dict(result.labels),
        "records": result.records,
        "paths": {k: str(v) for k, v in result.paths.items()},
        "wall_s": result.wall_s,
    }
    done.write_text(json.dumps(summary, indent=2))
    return result


def train(objective: str, paths: dict[str, Path], out: Path, sizes: dict, args: argparse.Namespace):
    from trainer.train import TrainConfig
    from trainer.train import train as run

    config = TrainConfig(
        data=[paths[objective]],
        out=out,
        objective=objective,
        seed=args.seed,
        steps=sizes["steps"],
        lr=sizes["lr"],
        batch_size=sizes["batch_size"],
    )
    return run(
        config,
        progress=lambda r: say(
            f"{objective} step {r.step}/{r.total}: loss {r.loss:.4f}, {r.tokens_per_second:.0f} tok/s"
        ),
    )


def ensure_gguf(adapter_dir: Path, gguf: Path) -> Path:
    from trainer.gguf_lora import ensure_served

    return ensure_served(adapter_dir, gguf)


def replay_arms(db: Path, task_file: Path, adapters: dict[str, Any], gguf: Path, sizes: dict, args: argparse.Namespace):
    from tasks.state_eval import ReplayConfig, run_replay

    arms = {"before": f"local/{gguf}@none"}
    arms |= {name: f"local/{gguf}@{result.adapter_dir / 'adapter.gguf'}" for name, result in adapters.items()}
    config = ReplayConfig(
        db=db,
        arms=arms,
        task_file=task_file,
        samples=sizes["eval_samples"],
        max_per_session=sizes["eval_states_per_session"],
        probes=sizes["probes"],
        seed=args.seed,
        sessions=spread_sessions(db, sizes["eval_sessions"], args.seed),
    )
    return run_replay(config, say)


def spread_sessions(db: Path, count: int, seed: int) -> frozenset[str] | None:
    """`count` held-out sessions of `db`, spread as `spread` does; None (all) for 0."""
    if count <= 0:
        return None
    from tasks.states import load_states

    by_task: dict[str, list[str]] = {}
    for state in load_states(db, max_per_session=1):
        by_task.setdefault(state.task_id, []).append(state.session_id)
    return frozenset(spread(by_task, count, seed))


def spread(by_task: dict[str, list[str]], count: int, seed: int) -> list[str]:
    """`count` sessions taken one per task in turn, the tasks in a seeded order that alternates
    repositories (each task's sessions seeded too): every task is replayed before any is replayed
    twice, and a few sessions already span the repositories."""
    from tasks.state_eval import repository

    rng = random.Random(seed)
    by_repository: dict[str, list[str]] = {}
    for task in sorted(by_task):
        by_repository.setdefault(repository(task), []).append(task)
    groups = [rng.sample(tasks, len(tasks)) for _, tasks in sorted(by_repository.items())]
    order = [group[i] for i in range(max(map(len, groups), default=0)) for group in groups if i < len(group)]
    queues = [rng.sample(sorted(by_task[task]), len(by_task[task])) for task in order]
    chosen: list[str] = []
    while len(chosen) < count and any(queues):
        for queue in queues:
            if queue and len(chosen) < count:
                chosen.append(queue.pop())
    return chosen


def forgetting_and_shift(adapters: dict[str, Any], heldout_db: Path) -> dict[str, Any]:
    from trainer import scoring
    from trainer.evaluate import forgetting, shift, state_pieces, successful_turns

    before, tokenizer = scoring.load(None, None)
    turns = successful_turns(heldout_db, 1.0, 20, tokenizer)
    pieces = state_pieces(heldout_db, None)
    out = {}
    for name, result in adapters.items():
        after, _ = scoring.load(None, result.adapter_dir)
        out[name] = {"forgetting": forgetting(before, after, tokenizer, turns), "shift": shift(before, after, pieces)}
        del after
    return out


def document(sizes, args, branches, adapters, replay, checks, stages, heldout_files) -> dict[str, Any]:
    from tasks.state_eval import compare_arms, gate

    arms = {}
    changes = compare_arms(replay)
    for name, result in adapters.items():
        promote, reason = gate(replay, after=name)
        forgetting = checks[name]["forgetting"]
        arms[name] = {
            "rates": replay["arms"][name],
            "change": changes.get(name),
            "gate": {"promote": promote, "reason": reason},
            "forgetting": {k: v.get("drop") for k, v in forgetting.items()},
            "shift_mean_kl": checks[name]["shift"].get("mean_kl"),
            "train": {
                "steps": result.steps,
                "loss_first": result.losses[0],
                "loss_last": result.losses[-1],
                "pairs": result.metrics.get("pairs"),
                "left_out": result.metrics.get("left_out"),
                "gap_filter": result.metrics.get("gap_filter"),
                "seconds": round(result.seconds, 1),
            },
        }
    return {
        "rule": RULE,
        "sizes": sizes,
        "heldout_sets": {name: str(path) for name, path in heldout_files.items()},
        "states": replay["states"],
        "heldout_tasks": replay["clusters"],
        "sessions": replay["sessions"],
        "detectable_change": replay["detectable_change"],
        "before": replay["arms"]["before"],
        "arms": arms,
        "no_tool": replay.get("no_tool"),
        "clean_states": replay.get("clean_states"),
        "branches": {
            "states": branches.states,
            "samples": branches.samples,
            "labels": dict(branches.labels),
            "records": branches.records,
        },
        "cpu_minutes": {k: round(v / 60, 2) for k, v in stages.cpu.items()},
        "wall_minutes": {k: round(v / 60, 2) for k, v in stages.wall.items()},
        "outcome": {name: (arm["change"] or {}).get("verdict") for name, arm in arms.items()},
    }


def report(doc: dict[str, Any]) -> str:
    lines = [
        f"rule: {doc['rule']}",
        "sizes: " + ", ".join(f"{k} {v}" for k, v in doc["sizes"].items()),
        f"branches: {doc['branches']['samples']} samples at {doc['branches']['states']} training states -> "
        f"records {doc['branches']['records']}; labels {doc['branches']['labels']}",
        f"held-out: {doc['states']} states from {doc['sessions']} sessions of {doc['heldout_tasks']} tasks "
        f"({', '.join(doc['heldout_sets'])}), {doc['sizes']['eval_samples']} samples per state and arm",
        "smallest detectable change (80% power): "
        + ("n/a" if doc["detectable_change"] is None else f"{doc['detectable_change']:+.1%}"),
        "",
        f"{'arm':8}{'errors/sample':>14}{'change':>9}{'95% interval':>20}{'verdict':>14}"
        f"{'premature':>10}{'finish':>8}{'KL moved':>10}{'forget gen':>11}{'forget turns':>13}",
    ]
    before = doc["before"]
    lines.append(
        f"{'base':8}{before['call_error_rate']:>14.3f}{'':>9}{'':>20}{'':>14}"
        f"{before['premature_finish_rate']:>10.3f}{before.get('finish_share', 0):>8.3f}"
    )
    for name, arm in doc["arms"].items():
        change, rates = arm["change"] or {}, arm["rates"]
        point, interval = change.get("relative_change"), change.get("interval")
        span = "n/a" if interval is None else f"[{interval[0]:+.0%}, {interval[1]:+.0%}]"
        forget = arm["forgetting"]
        kl = arm["shift_mean_kl"]
        lines.append(
            f"{name:8}{rates['call_error_rate']:>14.3f}{'n/a' if point is None else f'{point:+.0%}':>9}{span:>20}"
            f"{str(change.get('verdict')):>14}{rates['premature_finish_rate']:>10.3f}{rates.get('finish_share', 0):>8.3f}"
            f"{'n/a' if kl is None else f'{kl:.4f}':>10}{_num(forget.get('general_text')):>11}"
            f"{_num(forget.get('successful_turns')):>13}"
        )
    lines.append("")
    for name, arm in doc["arms"].items():
        t = arm["train"]
        lines.append(
            f"{name}: {t['pairs']} examples, {t['steps']} steps, loss {t['loss_first']:.3f} -> {t['loss_last']:.3f}"
            + (f", gap filter {t['gap_filter']}" if t.get("gap_filter") else "")
        )
        lines.append(f"  gate: {'promote' if arm['gate']['promote'] else 'keep'}: {arm['gate']['reason']}")
        lines.append(f"  tool mix: {arm['rates']['tool_mix']}")
    lines.append(f"base tool mix: {doc['before']['tool_mix']}")
    lines.append("\nby repository of the held-out tasks (training saw only the sample suite's textkit):")
    for name, arm in doc["arms"].items():
        for repo, change in ((arm["change"] or {}).get("by_repository") or {}).items():
            point, interval = change.get("relative_change"), change.get("interval")
            span = "no interval" if interval is None else f"[{interval[0]:+.0%}, {interval[1]:+.0%}]"
            shown = "n/a" if point is None else f"{point:+.0%}"
            lines.append(
                f"  {name:6} {repo:18} {change['tasks']:3} tasks: {_num(change.get('before'))} -> "
                f"{_num(change.get('after'))} errors/sample, {shown} {span}: {change.get('verdict')}"
            )
    lines.append("\nCPU minutes per stage (wall minutes in brackets):")
    for name, minutes in doc["cpu_minutes"].items():
        lines.append(f"  {name:28} {minutes:6.1f}  ({doc['wall_minutes'][name]:.1f})")
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.4f}"


if __name__ == "__main__":
    raise SystemExit(main())
