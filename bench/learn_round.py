"""One learning round on the embedded model, on a CPU, judged at held-out tasks of the same
repository: split by task -> rollouts -> branches -> train every arm -> state replay of every arm ->
forgetting -> whole held-out attempts -> the judgement.

The tasks (`--tasks FILE`, synthesised from one repository by `teachback tasks synth`; the bundled
sample suite by default) are split by task, seeded and stratified by the file each task deletes from,
and the split is written to the work folder before anything is trained. The base model attempts
every task; at the training tasks' recorded states it draws K replies each, labelled by running them
(tasks.branches): sft trains on the verified successes, dpo on same-state success/failure pairs with an
NLL term on the chosen reply, sdpo on failures with a same-state success as the teacher's
demonstration (a research arm at this size), mix on sdpo plus sft. Only states of training tasks reach
training data. The held-out tasks' states (up to 3 per session), frozen before training, are replayed
with the base and each adapter under the same seeds; the base arm is kept in the work folder's cache and
reused by a rerun. Lessons are off everywhere.

The rule is printed before anything runs (tasks.verdict.RULE), with the change the design can detect;
the headline is failures per sample (call errors and premature stops), judged by tasks.gate with
every guard reported. `--transfer-tasks FILE` adds a secondary figure: the same adapters on another
repository's tasks, labelled underpowered where it is.

    .venv/bin/python bench/learn_round.py [--tasks FILE] [--train-fraction 0.5] [--quick] [--work DIR]
        [--transfer-tasks FILE ...] [--size KEY=N ...] [--json]

--quick runs every stage at minimal sizes (it checks that the round runs, and measures nothing).
The last line of output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
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
OBJECTIVES = ("sft", "dpo", "sdpo", "mix")
SETTINGS = {  # what the embedded model needs to produce tool calls at all (as in `teachback demo`)
    "TEACHBACK_MAX_TOKENS": "256",
    "TEACHBACK_TEMPERATURE": "0.8",
    "TEACHBACK_REPO_MAP_TOKENS": "256",
    "TEACHBACK_LESSONS": "false",
}
FULL = {
    "train_attempts": 1,
    "heldout_attempts": 2,
    "transfer_attempts": 1,
    "max_steps": 8,  # steps of a whole held-out attempt
    "states_per_session": 3,  # training states per session branched from
    "branch_samples": 4,
    "hint_samples": 2,  # at a training state with no success: replies drawn with the feedback in context
    "no_tool_samples": 2,  # at each training session's first state: a training no-tool question
    "forward_samples": 2,  # one step after a training state's first verified success: replies drawn there
    "eval_states_per_session": 3,
    "eval_samples": 2,  # seeds per held-out state and arm
    "probes": 24,  # no-tool questions, 2 samples each (eval_samples)
    "epochs": 2,
    "max_train_steps": 60,
    "batch_size": 6,
    "lr": 5e-4,
    "attempt_tasks": 8,  # held-out tasks each arm attempts whole (the steps/edits/pass-rate guards)
    "min_heldout_tasks": 24,
}
QUICK = {
    **FULL,
    "train_attempts": 1,
    "heldout_attempts": 1,
    "max_steps": 2,
    "states_per_session": 1,
    "branch_samples": 2,
    "hint_samples": 1,
    "no_tool_samples": 1,
    "forward_samples": 1,
    "eval_states_per_session": 1,
    "eval_samples": 1,
    "probes": 2,
    "epochs": 1,
    "max_train_steps": 1,
    "batch_size": 2,
    "attempt_tasks": 1,
    "min_heldout_tasks": 1,
}


class Stages:
    """CPU seconds (this process and its children) and wall seconds per stage, kept in `ledger` (a JSON
    file in the work folder) as each stage ends: a run resumed in the same folder adds its own to what
    the earlier processes spent, so the figures and the total are the whole round's, not the last
    process's (which skips the finished stages in no time)."""

    def __init__(self, ledger: Path) -> None:
        self.ledger = ledger
        kept = json.loads(ledger.read_text(encoding="utf-8")) if ledger.is_file() else {}
        self.cpu: dict[str, float] = dict(kept.get("cpu", {}))
        self.wall: dict[str, float] = dict(kept.get("wall", {}))
        self.earlier_s: float = float(kept.get("total_s", 0.0))  # the earlier processes' wall time
        self.processes: int = int(kept.get("processes", 0)) + 1
        self.started = time.perf_counter()

    def run(self, name: str, work, *args, **kwargs):
        cpu, wall = _cpu(), time.perf_counter()
        say(f"== {name}")
        try:
            return work(*args, **kwargs)
        finally:
            self.cpu[name] = self.cpu.get(name, 0.0) + _cpu() - cpu
            self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - wall
            say(f"   {name}: {self.wall[name] / 60:.1f} min wall, {self.cpu[name] / 60:.1f} CPU-min")
            self._keep()

    def total_s(self) -> float:
        return self.earlier_s + time.perf_counter() - self.started

    def _keep(self) -> None:
        doc = {"cpu": self.cpu, "wall": self.wall, "total_s": self.total_s(), "processes": self.processes}
        self.ledger.write_text(json.dumps(doc), encoding="utf-8")


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def main() -> int:
    from cli.options import add_executor_options

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=Path, help="tasks of one repository (default: the bundled sample suite)")
    parser.add_argument("--train-fraction", type=float, default=0.5, help="share of the tasks trained on")
    parser.add_argument("--transfer-tasks", type=Path, action="append", default=[], metavar="FILE")
    parser.add_argument("--quick", action="store_true", help="every stage, minimal sizes (checks it runs)")
    parser.add_argument("--work", type=Path, help="keep everything here, and resume there")
    parser.add_argument(
        "--objectives", default=",".join(OBJECTIVES), help=f"comma-separated, of {','.join(OBJECTIVES)}"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--parallel", type=int, default=2, help="task attempts at once (on Ray, sessions sampled too)")
    add_executor_options(parser, "attempts, branches and replays", parallel=False)
    parser.add_argument("--size", action="append", default=[], metavar="KEY=N", help=f"one of {', '.join(FULL)}")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON document only")
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
    if not 0 < args.train_fraction < 1:
        parser.error("--train-fraction takes a share between 0 and 1")

    from agent.providers.llama_engine import LocalModelError, check_runtime
    from tasks.records import TaskError, load_tasks
    from tasks.sample_suite import sample_suite_path
    from tasks.verdict import RULE, planned_detectable

    try:
        gguf = check_runtime("smollm2")
        task_file = (args.tasks or sample_suite_path()).resolve()
        tasks = load_tasks(task_file)
    except (LocalModelError, TaskError, OSError) as exc:
        print(f"learn round: {exc}")
        return 2
    work = (args.work or Path(tempfile.mkdtemp(prefix="teachback-learn-round-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    os.environ.update(SETTINGS)
    train_tasks, held_tasks = split_by_task(tasks, args.train_fraction, args.seed)
    if len(held_tasks) < sizes["min_heldout_tasks"]:
        print(
            f"learn round: {len(held_tasks)} held-out tasks, fewer than {sizes['min_heldout_tasks']}: synthesise more "
            "tasks from the repository (teachback tasks synth --n 64) or raise --train-fraction's complement"
        )
        return 2
    files = write_split(work, task_file, train_tasks, held_tasks, args)
    per_task = sizes["heldout_attempts"] * sizes["eval_states_per_session"] * sizes["eval_samples"]
    planned = planned_detectable(len(held_tasks), per_task)
    say(f"rule (fixed before the run): {RULE}")
    say(
        f"design: {len(train_tasks)} training tasks, {len(held_tasks)} held-out tasks of {task_file.name}, up to "
        f"{per_task} samples per held-out task and arm; planned smallest detectable change (80% power, base "
        f"failure rate 0.6, intra-task correlation 0.2): {'n/a' if planned is None else f'{planned:+.0%}'}"
    )
    stages = Stages(work / "stages.json")
    train_db, held_db = work / "train.db", work / "heldout.db"
    stages.run(
        "rollouts: training tasks", rollouts, files["train"], train_db, sizes["train_attempts"], MODEL, sizes, args
    )
    stages.run(
        "rollouts: held-out tasks", rollouts, files["heldout"], held_db, sizes["heldout_attempts"], MODEL, sizes, args
    )
    branches = stages.run("branches", branch, train_db, files["train"], work / "branches", sizes, args)
    held_ids = {t.instance_id for t in held_tasks}
    leaked = held_ids & record_tasks(branches.paths)
    if leaked:  # by construction impossible: the training database holds only training tasks
        raise SystemExit(f"learn round: held-out tasks reached the training data: {sorted(leaked)[:3]}")
    adapters = {}
    for objective in objectives:
        adapters[objective] = stages.run(f"train {objective}", train, objective, branches, work, sizes, args)
    for result in adapters.values():
        ensure_gguf(result.adapter_dir, gguf)
    replay = stages.run(
        "replay held-out states", replay_arms, held_db, files["heldout"], adapters, gguf, sizes, args, work
    )
    replay["forgetting"] = stages.run("forgetting and shift", forgetting_and_shift, adapters, held_db)
    replay["attempts"] = stages.run(
        "whole held-out attempts", whole_attempts, files["heldout"], adapters, gguf, sizes, args, work
    )
    transfer = {}
    for path in args.transfer_tasks:
        transfer[path.stem] = stages.run(
            f"transfer: {path.stem}", transfer_figure, path, adapters, gguf, sizes, args, work
        )
    doc = document(sizes, args, files, train_tasks, held_tasks, branches, adapters, replay, transfer, stages)
    (work / "round.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    if not args.json:
        print(report(doc, replay))
        print(f"\neverything is in {work}")
    print(json.dumps(doc, default=str, separators=(",", ":")))
    return 0


def split_by_task(tasks: list, train_fraction: float, seed: int) -> tuple[list, list]:
    """Tasks split by task, stratified by the file each deletes from: files in a seeded order, each
    file's tasks shuffled, and a task held out whenever that keeps the held-out share at or under the
    target so far. Every file with two or more tasks lands on both sides."""
    rng = random.Random(seed)
    by_file: dict[str, list] = {}
    for task in tasks:
        by_file.setdefault(deleted_file(task), []).append(task)
    train, held = [], []
    target = 1 - train_fraction
    for name in rng.sample(sorted(by_file), len(by_file)):
        group = rng.sample(by_file[name], len(by_file[name]))
        for number, task in enumerate(group):
            seen = len(train) + len(held) + 1
            must_train = number == 0 and len(group) > 1  # a file's first task trains, its second is held out
            must_hold = number == 1
            if must_hold or (not must_train and len(held) + 1 <= round(target * seen)):
                held.append(task)
            else:
                train.append(task)
    return train, held


def deleted_file(task: Any) -> str:
    return task.deleted[0].path if task.deleted else "?"


def write_split(work: Path, task_file: Path, train_tasks: list, held_tasks: list, args) -> dict[str, Path]:
    """The split's task files and split.json, written before any rollout or training; a rerun in the
    same folder must find the same split (the seed and the task file decide it)."""
    folder = work / "tasks"
    folder.mkdir(exist_ok=True)
    paths = {"train": folder / "train.jsonl", "heldout": folder / "heldout.jsonl"}
    for name, chosen in (("train", train_tasks), ("heldout", held_tasks)):
        lines = []
        for task in chosen:
            record = json.loads(task.to_json())
            for key in ("snapshot", "gold_patch"):  # resolvable from the work folder
                if record.get(key) and not Path(record[key]).is_absolute():
                    record[key] = str((task_file.parent / record[key]).resolve())
            lines.append(json.dumps(record))
        paths[name].write_text("".join(line + "\n" for line in lines))
    split = {
        "task_file": str(task_file),
        "seed": args.seed,
        "train_fraction": args.train_fraction,
        "train": sorted(t.instance_id for t in train_tasks),
        "heldout": sorted(t.instance_id for t in held_tasks),
    }
    saved = work / "split.json"
    if saved.is_file() and json.loads(saved.read_text()) != split:
        raise SystemExit(f"learn round: {saved} holds another split: give a new --work folder")
    saved.write_text(json.dumps(split, indent=2) + "\n")
    return paths


def rollouts(
    task_file: Path, db: Path, attempts: int, model: str, sizes: dict, args, whole: bool = False
) -> list[dict]:
    """`attempts` attempts at every task of `task_file`, recorded in `db`. Unless `whole`, an attempt
    stops after the steps whose states are branched from or replayed (the steps after them are never
    used, and a step's prompt does not depend on the step limit)."""
    from tasks.executors import ResultsFile, run_all, specs_for
    from tasks.records import load_tasks

    steps = sizes["max_steps"] if whole else min(sizes["max_steps"], used_steps(sizes))
    specs = specs_for(
        load_tasks(task_file),
        attempts,
        task_file=str(task_file),
        model=model,
        db=str(db),
        overrides={"max_steps": steps},
    )
    return run_all(
        specs,
        ResultsFile(db.with_name(f"{db.stem}.{task_file.stem}.attempts.jsonl")),
        executor=args.executor,
        parallel=args.parallel,
        address=args.address,
        on_result=lambda r, n, total: say(
            f"[{n}/{total}] {r['instance_id']}: reward {r.get('reward')}, {r.get('call_errors')} call error(s) "
            f"in {r.get('tool_calls')} call(s)"
        ),
    )


def used_steps(sizes: dict) -> int:
    return max(sizes["states_per_session"], sizes["eval_states_per_session"])


def branch(db: Path, task_file: Path, out: Path, sizes: dict, args):
    """The branch records (kept in `out` with a summary: a rerun in the same --work reuses them)."""
    from collections import Counter

    from tasks.branches import BranchConfig, BranchResult, render_summary, run_branches
    from tasks.executors import sessions_on

    done = out / "summary.json"
    if not done.is_file():
        result = run_branches(
            BranchConfig(
                db=db,
                out=out,
                task_file=task_file,
                model=MODEL,
                samples=sizes["branch_samples"],
                max_per_session=sizes["states_per_session"],
                hint_samples=sizes["hint_samples"],
                no_tool_samples=sizes["no_tool_samples"],
                forward_samples=sizes["forward_samples"],
                **sessions_on(args.executor, args.parallel, args.address),
            ),
            say,
        )
        say(render_summary(result))
        summary = {
            "states": result.states,
            "samples": result.samples,
            "labels": dict(result.labels),
            "sources": dict(result.sources),
            "records": result.records,
            "paths": {k: str(v) for k, v in result.paths.items()},
            "wall_s": result.wall_s,
        }
        done.write_text(json.dumps(summary, indent=2))
    saved = json.loads(done.read_text())
    return BranchResult(
        states=saved["states"],
        samples=saved["samples"],
        labels=Counter(saved["labels"]),
        sources=Counter(saved.get("sources", {})),  # a summary written before sources were counted
        records=saved["records"],
        paths={k: Path(v) for k, v in saved["paths"].items()},
        wall_s=saved["wall_s"],
    )


def record_tasks(paths: dict[str, Path]) -> set[str]:
    """Every task a training record comes from."""
    found = set()
    for path in paths.values():
        with path.open(encoding="utf-8") as lines:
            found |= {json.loads(line)["task_id"] for line in lines if line.strip()}
    return found


def train(objective: str, branches, work: Path, sizes: dict, args):
    """About `epochs` passes over the objective's records (capped), at the round's batch size."""
    from trainer.train import TrainConfig
    from trainer.train import train as run

    source = "sdpo" if objective == "mix" else objective
    records = branches.records.get(source, 0)
    steps = max(1, min(sizes["max_train_steps"], math.ceil(sizes["epochs"] * records / sizes["batch_size"])))
    config = TrainConfig(
        data=[branches.paths[source]],
        out=work / f"adapter-{objective}",
        objective=objective,
        seed=args.seed,
        steps=steps,
        lr=sizes["lr"],
        batch_size=sizes["batch_size"],
    )
    return run(config, progress=lambda r: say(f"{objective} step {r.step}/{r.total}: loss {r.loss:.4f}"))


def ensure_gguf(adapter_dir: Path, gguf: Path) -> Path:
    from trainer.gguf_lora import ensure_served

    return ensure_served(adapter_dir, gguf)


def served(gguf: Path, result: Any | None) -> str:
    return f"local/{gguf}@{'none' if result is None else result.adapter_dir / 'adapter.gguf'}"


def replay_arms(db: Path, task_file: Path, adapters: dict, gguf: Path, sizes: dict, args, work: Path) -> dict:
    from tasks.executors import sessions_on
    from tasks.state_eval import ReplayConfig, run_replay

    config = ReplayConfig(
        db=db,
        arms={"before": served(gguf, None)} | {name: served(gguf, result) for name, result in adapters.items()},
        task_file=task_file,
        samples=sizes["eval_samples"],
        max_per_session=sizes["eval_states_per_session"],
        probes=sizes["probes"],
        seed=args.seed,
        cache=work / "labels",
        **sessions_on(args.executor, args.parallel, args.address),
    )
    return run_replay(config, say)


def forgetting_and_shift(adapters: dict, heldout_db: Path) -> dict[str, Any]:
    """Forgetting (general text; turns of held-out sessions that solved their task) and how far each
    adapter moved along held-out recorded replies; the base side computed once."""
    from trainer import scoring
    from trainer.evaluate import forgetting, shift, state_pieces, successful_turns

    before, tokenizer = scoring.load(None, None)
    turns = successful_turns(heldout_db, 1.0, 20, tokenizer)
    pieces = state_pieces(heldout_db, None)
    out, base = {}, None
    for name, result in adapters.items():
        after, _ = scoring.load(None, result.adapter_dir)
        found = forgetting(before, after, tokenizer, turns, base=base)
        base = {key: part.get("before") for key, part in found.items()}
        out[name] = {**found, "shift": shift(before, after, pieces)}
        del after
    return out


def whole_attempts(task_file: Path, adapters: dict, gguf: Path, sizes: dict, args, work: Path) -> dict:
    """{arm: {task: steps, edits, passed}} on the first `attempt_tasks` held-out tasks, one whole
    attempt each (up to max_steps), the base model's among them ("before"), all under the same seed."""
    from tasks.records import load_tasks

    chosen = load_tasks(task_file)[: sizes["attempt_tasks"]]
    names = {t.instance_id for t in chosen}

    def cells(records: list[dict]) -> dict[str, dict[str, float]]:
        return {
            r["instance_id"]: {"steps": r.get("steps", 0), "edits": r.get("edits", 0), "passed": r.get("reward") == 1.0}
            for r in records
            if r["instance_id"] in names and r.get("attempt", 0) == 0 and not r.get("error")
        }

    subset = work / "tasks" / "attempted.jsonl"
    subset.write_text("".join(t.to_json() + "\n" for t in chosen))
    out = {}
    for name, result in {"before": None, **adapters}.items():
        db = work / f"attempts-{name}.db"
        out[name] = cells(rollouts(subset, db, 1, served(gguf, result), sizes, args, whole=True))
    return out


def transfer_figure(path: Path, adapters: dict, gguf: Path, sizes: dict, args, work: Path) -> dict[str, Any]:
    """The adapters at the states of another repository's tasks: a secondary figure."""
    from tasks.gate import judge

    db = work / f"transfer-{path.stem}.db"
    rollouts(path.resolve(), db, sizes["transfer_attempts"], MODEL, sizes, args)
    doc = replay_arms(db, path.resolve(), adapters, gguf, sizes, args, work)
    out = {}
    for name in adapters:
        judged = judge(doc, name, seed=args.seed)
        detectable = judged["detectable_change"]
        out[name] = {
            "outcome": judged["outcome"],
            "tasks": judged["failures"]["tasks"],
            "failures": {"before": judged["failures"]["before"], "after": judged["failures"]["after"]},
            "relative_change": judged["failures"]["relative_change"],
            "interval": judged["failures"]["interval"],
            "detectable_change": detectable,
            "underpowered": detectable is None or detectable < -0.30,
        }
    return out


def document(sizes, args, files, train_tasks, held_tasks, branches, adapters, replay, transfer, stages):
    from tasks.gate import judge
    from tasks.state_eval import strata
    from trainer.learn import DEFAULT_OBJECTIVE

    trained_files = {deleted_file(t) for t in train_tasks}
    held_files = {t.instance_id: deleted_file(t) for t in held_tasks}
    groups = {
        "file_seen_in_training": lambda s: held_files.get(s["task"]) in trained_files,
        "file_not_seen_in_training": lambda s: held_files.get(s["task"]) not in trained_files,
        "first_states": lambda s: s["edits"] == 0 and s["step"] <= 1,
        "later_states": lambda s: not (s["edits"] == 0 and s["step"] <= 1),
    }
    arms, strata_out, reported = {}, {}, {}
    for name, result in adapters.items():
        judged = judge(replay, name, seed=args.seed)
        failures, errors = judged["failures"], judged["call_errors"]
        arms[name] = {
            "outcome": judged["outcome"],
            "failures": {"before": failures["before"], "after": failures["after"], "parts": judged["parts"]},
            "call_errors": {
                "before": errors["before"],
                "after": errors["after"],
                "by_kind": {side: judged["parts"][side]["by_kind"] for side in ("before", "after")},
            },
            "relative_change": failures["relative_change"],
            "interval": failures["interval"],
            "interval_method": failures["method"],
            "detectable_change": judged["detectable_change"],
            "guards": {
                g: {k: v for k, v in guard.items() if k in ("value", "interval", "margin", "pass", "why")}
                for g, guard in judged["guards"].items()
                if guard.get("required", True) or guard["pass"] is not None
            },
            "promote": judged["promote"],
        }
        strata_out[name] = strata(replay, name, groups, args.seed)
        reported[name] = {
            **judged["reported"],
            "train": {
                "records": result.metrics.get("pairs"),
                "steps": result.steps,
                "loss_first": result.losses[0],
                "loss_last": result.losses[-1],
                "left_out": result.metrics.get("left_out"),
                "gap_filter": result.metrics.get("gap_filter"),
            },
            "shift_mean_kl": replay["forgetting"][name]["shift"].get("mean_kl"),
        }
    wall = stages.total_s()
    return {
        "default_objective": DEFAULT_OBJECTIVE,
        "heldout_tasks": len(held_tasks),
        "arms": arms,
        "rule": replay["rule"],
        "training_tasks": len(train_tasks),
        "heldout_states": replay["states"],
        "heldout_sessions": replay["sessions"],
        "samples_per_arm": replay["arms"]["before"]["samples"],
        "split": str(files["train"].parent.parent / "split.json"),
        "sizes": sizes,
        "strata": strata_out,
        "transfer": transfer,
        "reported": reported,
        "branches": {
            "states": branches.states,
            "samples": branches.samples,
            "labels": dict(branches.labels),
            "verified_successes_by_source": dict(branches.sources),
            "records": branches.records,
        },
        "cpu_minutes": {k: round(v / 60, 2) for k, v in stages.cpu.items()},
        "wall_minutes": {k: round(v / 60, 2) for k, v in stages.wall.items()},
        "total_wall_minutes": round(wall / 60, 1),
        "processes": stages.processes,  # more than 1: resumed in the same --work folder
    }


def report(doc: dict[str, Any], replay: dict[str, Any]) -> str:
    from tasks.state_eval import render

    lines = [render(replay), "", "strata (failures per sample, before -> after):"]
    for name, groups in doc["strata"].items():
        for group, change in groups.items():
            point = change["relative_change"]
            lines.append(
                f"  {name:5} {group:26} {change['tasks']:3} tasks {change['samples']:4} samples: "
                f"{_rate(change['before'])} -> {_rate(change['after'])} "
                f"({'n/a' if point is None else f'{point:+.0%}'}): {change['outcome']}"
            )
    for repo, arms in doc["transfer"].items():
        for name, found in arms.items():
            weak = " (underpowered)" if found["underpowered"] else ""
            lines.append(f"  transfer {repo} {name}: {found['outcome']}{weak}")
    lines.append(f"\ndefault objective of `teachback learn`: {doc['default_objective']}")
    lines.append("wall minutes per stage (CPU minutes):")
    for name, minutes in doc["wall_minutes"].items():
        lines.append(f"  {name:28} {minutes:6.1f}  ({doc['cpu_minutes'][name]:.1f})")
    lines.append(f"  {'total':28} {doc['total_wall_minutes']:6.1f}")
    return "\n".join(lines)


def _rate(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    raise SystemExit(main())
