"""State replay throughput: labelled samples per CPU-minute at recorded states, beside graded
whole-rollout attempts per CPU-minute, in the same run, with the embedded model (`local/smollm2@none`)
on the shipped sample suite.

First it records --attempts seeded attempts at each of the first --tasks tasks (sealing, the
agent's session, grading: what `teachback tasks run` does), one after another in this process; then
it loads the states of those sessions and, at each, samples --samples replies (seeds 0..K-1) and
labels each on a scratch copy of the files (what `teachback tasks branch` does, without writing).
Each phase is timed in CPU seconds of this process and its children (the graders' and labellers'
test runs) and in wall seconds; the model is loaded before either starts. A failure is a call
error (a reply cut off at the cap counts, as in `teachback eval --states`): recorded, for the
attempts, labelled, for the samples; distinct failures are distinct reply texts within a session.

    .venv/bin/python bench/state_replay_bench.py [--tasks 3] [--attempts 1] [--max-steps 4]
        [--max-tokens 96] [--samples 4] [--local-threads 1] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

MODEL = "local/smollm2@none"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=3, help="the first N tasks of the sample suite (default 3)")
    parser.add_argument("--attempts", type=int, default=1, help="seeded attempts per task (default 1)")
    parser.add_argument("--max-steps", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=96, help="tokens per reply, in attempts and samples")
    parser.add_argument("--samples", type=int, default=4, help="replies per state (default 4)")
    parser.add_argument("--local-threads", type=int, default=1, help="the embedded model's threads (default 1)")
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    from agent.providers.llama_engine import LocalModelError, check_runtime

    try:
        check_runtime(MODEL.removeprefix("local/"))
    except LocalModelError as exc:
        print(f"state replay bench: the embedded model cannot run here: {exc}")
        return 1
    with tempfile.TemporaryDirectory(prefix="teachback-state-replay-bench-") as scratch:
        os.environ["TEACHBACK_HOME"] = str(Path(scratch, "home"))
        _warm(args.local_threads)
        load = [os.getloadavg()[0]]
        db = Path(scratch, "feedback.db")
        rollouts = _rollouts(args, db, Path(scratch, "work"))
        replay = _replay(args, db)
        load.append(os.getloadavg()[0])
    doc = _document(args, rollouts, replay, load)
    print(json.dumps(doc, indent=2) if args.json else _table(doc))
    return 0 if rollouts["harness_errors"] == 0 and replay["samples"] else 1


def _cpu() -> float:
    """CPU seconds of this process and of its children that ended (the test runs)."""
    own = os.times()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.user + own.system + children.ru_utime + children.ru_stime


def _warm(threads: int) -> None:
    """Load the model as the attempts and the sampler will use it, so neither phase pays for it."""
    from agent.providers.llama_engine import load_engine, model_path

    load_engine(str(model_path("smollm2")), n_threads=threads)


def _rollouts(args: argparse.Namespace, db: Path, work: Path) -> dict[str, Any]:
    from tasks.records import load_tasks
    from tasks.rollout import AttemptSpec, run_attempt
    from tasks.sample_suite import sample_suite_path

    settings = {
        "max_steps": args.max_steps,
        "temperature": args.temperature,
        "max_tokens": args.max_tokens,
        "repo_map_tokens": 256,
        "local_threads": args.local_threads,
    }
    tasks = load_tasks(sample_suite_path())[: args.tasks]
    cpu, wall = _cpu(), time.perf_counter()
    records = [
        run_attempt(
            AttemptSpec(
                task=task,
                task_file=str(sample_suite_path()),
                attempt=attempt,
                model=MODEL,
                db=str(db),
                work_dir=str(work),
                overrides=settings,
            )
        )
        for task in tasks
        for attempt in range(args.attempts)
    ]
    return {
        "attempts": len(records),
        "cpu_s": _cpu() - cpu,
        "wall_s": time.perf_counter() - wall,
        "steps": sum(r.get("steps") or 0 for r in records),
        "solved": sum(r.get("reward") == 1.0 for r in records),
        "harness_errors": sum(bool(r.get("error")) for r in records),
    }


def _replay(args: argparse.Namespace, db: Path) -> dict[str, Any]:
    from tasks.branches import At, build_records, vocabulary
    from tasks.records import load_tasks
    from tasks.sample_suite import sample_suite_path
    from tasks.states import load_states, replayable

    decode = vocabulary(MODEL)  # as `teachback tasks branch` loads it
    cpu, wall = _cpu(), time.perf_counter()
    tasks = {t.instance_id: t for t in load_tasks(sample_suite_path())}
    states = [s for s in load_states(db) if replayable(s)]
    labels: Counter[str] = Counter()
    found: set[tuple[str, str]] = set()
    records: Counter[str] = Counter()
    samples = 0
    for number, state in enumerate(states, 1):
        branches = asyncio.run(_branch(args, state, tasks[state.task_id], decode))
        samples += len(branches)
        labels.update(b.label.kind for b in branches)
        found |= {(state.session_id, b.text) for b in branches if b.label.call_error}
        for kind, made in build_records(At(state.session_id, state.step, state.task_id), branches).items():
            records[kind] += len(made)
        print(f"state {number}/{len(states)}: {', '.join(b.label.kind for b in branches)}", file=sys.stderr)
    recorded = {(s.session_id, _recorded_text(s)) for s in states if _recorded_failure(s, args.max_tokens)}
    return {
        "states": len(states),
        "samples": samples,
        "cpu_s": _cpu() - cpu,
        "wall_s": time.perf_counter() - wall,
        "labels": dict(labels.most_common()),
        "failures_states": len(found),
        "failures_rollouts": len(recorded),
        "records": {kind: records[kind] for kind in ("sft", "dpo", "sdpo")},
    }


async def _branch(args: argparse.Namespace, state: Any, task: Any, decode: Any) -> list[Any]:
    """K labelled samples at `state`, as `teachback tasks branch` draws them."""
    from tasks.branches import branch_state
    from tasks.sample_suite import sample_suite_path
    from tasks.states import Sampler, Scratch

    scratch = Scratch(state, task, sample_suite_path())
    try:
        sampler = Sampler(MODEL, cap=args.max_tokens)
        return await branch_state(state, sampler, args.samples, scratch, task, sample_suite_path(), decode)
    finally:
        scratch.close()


def _recorded_text(state: Any) -> str:
    return str(state.reply.get("content") or "")


def _recorded_failure(state: Any, cap: int) -> bool:
    """The recorded reply was a call error, or made no call and reached the cap (cut off)."""
    cut = not state.reply.get("tool_calls") and len(state.reply_ids or []) >= cap
    return state.recorded.call_error or cut


def _document(args: argparse.Namespace, rollouts: dict, replay: dict, load: list[float]) -> dict[str, Any]:
    def per_min(count: int, cpu_s: float) -> float:
        return round(count / cpu_s * 60, 3) if cpu_s else 0.0

    attempts_rate = per_min(rollouts["attempts"], rollouts["cpu_s"])
    samples_rate = per_min(replay["samples"], replay["cpu_s"])
    fail_rollouts = per_min(replay["failures_rollouts"], rollouts["cpu_s"])
    fail_states = per_min(replay["failures_states"], replay["cpu_s"])
    return {
        "attempts_per_cpu_min": attempts_rate,
        "states_per_cpu_min": per_min(replay["states"], replay["cpu_s"]),
        "samples_per_cpu_min": samples_rate,
        "failures_per_cpu_min_rollouts": fail_rollouts,
        "failures_per_cpu_min_states": fail_states,
        "ratio_samples_to_attempts": round(samples_rate / attempts_rate, 2) if attempts_rate else None,
        "ratio_failures_states_to_rollouts": round(fail_states / fail_rollouts, 2) if fail_rollouts else None,
        "records_per_cpu_min": {k: per_min(n, replay["cpu_s"]) for k, n in replay["records"].items()},
        "attempts": rollouts["attempts"],
        "steps": rollouts["steps"],
        "solved": rollouts["solved"],
        "harness_errors": rollouts["harness_errors"],
        "states": replay["states"],
        "samples": replay["samples"],
        "failures_rollouts": replay["failures_rollouts"],
        "failures_states": replay["failures_states"],
        "labels": replay["labels"],
        "records": replay["records"],
        "cpu_s": {"rollouts": round(rollouts["cpu_s"], 1), "states": round(replay["cpu_s"], 1)},
        "wall_s": {"rollouts": round(rollouts["wall_s"], 1), "states": round(replay["wall_s"], 1)},
        "settings": {
            "model": MODEL,
            "tasks": args.tasks,
            "attempts_per_task": args.attempts,
            "max_steps": args.max_steps,
            "max_tokens": args.max_tokens,
            "samples_per_state": args.samples,
            "local_threads": args.local_threads,
            "temperature": args.temperature,
            "cpus": os.cpu_count(),
            "load_average": load,
        },
    }


def _table(doc: dict[str, Any]) -> str:
    s = doc["settings"]
    head = (
        f"{s['tasks']} tasks x {s['attempts_per_task']} attempt(s), {s['model']}, max {s['max_steps']} steps, "
        f"{s['max_tokens']} tokens a reply, K={s['samples_per_state']}, {s['local_threads']} thread(s), "
        f"{s['cpus']} CPUs, load average {s['load_average'][0]:.1f} -> {s['load_average'][1]:.1f}"
    )
    made = {"rollouts": f"{doc['attempts']} attempts", "states": f"{doc['samples']} samples ({doc['states']} states)"}
    rates = {"rollouts": doc["attempts_per_cpu_min"], "states": doc["samples_per_cpu_min"]}
    lines = [
        head,
        "| method | made | per CPU-min | distinct failures | failures per CPU-min | CPU s | wall s |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for side, name in (("rollouts", "whole rollouts"), ("states", "state replay")):
        lines.append(
            f"| {name} | {made[side]} | {rates[side]:.2f} | {doc['failures_' + side]} | "
            f"{doc['failures_per_cpu_min_' + side]:.2f} | {doc['cpu_s'][side]:.1f} | {doc['wall_s'][side]:.1f} |"
        )
    records = ", ".join(f"{k} {n}" for k, n in doc["records"].items())
    labels = ", ".join(f"{k} {n}" for k, n in doc["labels"].items())
    lines += [
        f"labelled samples per CPU-min / attempts per CPU-min: {doc['ratio_samples_to_attempts']}; "
        f"failures per CPU-min, state replay / rollouts: {doc['ratio_failures_states_to_rollouts']}",
        f"states per CPU-min {doc['states_per_cpu_min']:.2f}; records {records}; labels {labels}",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
