"""Rollout throughput: graded attempts per minute on the shipped sample suite with the embedded model
(`local/smollm2`), on the local process pool and on a local Ray instance, one run each.

Each executor gets the same attempts (the first --tasks tasks of the suite, --attempts each), a
fresh feedback database and results file, and the same settings (a short step limit: the embedded
model rarely solves a task, and throughput is the point). The time counts everything an attempt
does: sealing the workspace, the agent's session (model calls included), and grading; Ray's start
and stop are counted too, as a user would wait for them.

    .venv/bin/python bench/rollout_bench.py [--tasks 2] [--attempts 1] [--parallel 2] [--max-steps 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

MODEL = "local/smollm2"
# What the embedded model needs to produce tool calls at all (as in `teachback demo`).
SETTINGS = {"TEACHBACK_MAX_TOKENS": "256", "TEACHBACK_TEMPERATURE": "0.8", "TEACHBACK_REPO_MAP_TOKENS": "256"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--attempts", type=int, default=1)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=2)
    parser.add_argument("--max-time", type=float, default=600.0, help="seconds per attempt for the agent")
    parser.add_argument("--executors", default="local,ray")
    args = parser.parse_args()

    from agent.providers.llama_engine import LocalModelError, check_runtime

    try:
        check_runtime(MODEL.removeprefix("local/"))
    except LocalModelError as exc:
        print(f"rollout bench: the embedded model cannot run here: {exc}")
        return 1
    from tasks.bench import summarize
    from tasks.executors import ResultsFile, run_all, specs_for
    from tasks.records import load_tasks
    from tasks.sample_suite import sample_suite_path

    tasks = load_tasks(sample_suite_path())[: args.tasks]
    rows = []
    with tempfile.TemporaryDirectory(prefix="teachback-rollout-bench-") as scratch:
        os.environ.update(SETTINGS, TEACHBACK_HOME=str(Path(scratch, "home")))
        for executor in args.executors.split(","):
            if executor == "ray" and not _has_ray():
                print("ray: not installed (pip install 'teachback[ray]'); skipped")
                continue
            specs = specs_for(
                tasks,
                args.attempts,
                task_file=str(sample_suite_path()),
                model=MODEL,
                db=str(Path(scratch, f"{executor}.db")),
                overrides={"max_steps": args.max_steps, "max_time": args.max_time},
            )
            started = time.perf_counter()
            records = run_all(
                specs, ResultsFile(Path(scratch, f"{executor}.jsonl")), executor=executor, parallel=args.parallel
            )
            seconds = time.perf_counter() - started
            s = summarize(records, args.attempts)["summary"]
            rows.append((executor, len(records), seconds, s))
    print(
        f"{len(tasks)} tasks x {args.attempts} attempt(s), {MODEL}, max {args.max_steps} steps, "
        f"{args.parallel} at once, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end"
    )
    print(
        "| executor | attempts | seconds | rollouts/min | s/attempt (agent, tests) | steps | pass@1 | harness errors |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---:|")
    for executor, count, seconds, s in rows:
        print(
            f"| {executor} | {count} | {seconds:.1f} | {count / seconds * 60:.2f} | {s['wall_s']:.1f} "
            f"({s['agent_s']:.1f}, {s['grade_s']:.1f}) | {s['steps']:.1f} | {s['pass@1']:.2f} | {s['harness_errors']} |"
        )
    return 0 if rows and all(s["harness_errors"] == 0 for *_, s in rows) else 1


def _has_ray() -> bool:
    import importlib.util

    return importlib.util.find_spec("ray") is not None


if __name__ == "__main__":
    sys.exit(main())
