"""`teachback tasks synth|run|export|branch` and `teachback bench`: graded tasks made from a repository,
attempts at them, and a model's score on a suite."""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

from cli.options import add_executor_options

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
SUITES = ("sample",)


def run_action(args: argparse.Namespace) -> int:
    """What the command line chose; a task or bench file, an option or Ray that cannot be used is a
    usage error, said in one line."""
    from tasks.executors import ExecutorError
    from tasks.records import TaskError

    try:
        return args.handler(args)
    except (ValueError, TaskError, ExecutorError) as exc:  # a task or bench file, an option, Ray missing
        print(f"teachback {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE


def add_tasks_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Tasks made from a repository by deleting a feature its tests exercise, and graded attempts at them."
    )
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    synth = sub.add_parser("synth", help="make tasks from a repository whose tests pass")
    synth.add_argument("repo", type=Path, help="the repository (its tests must pass as it is)")
    synth.add_argument("--out", type=Path, required=True, help="folder for the task file and what it needs")
    synth.add_argument("--n", type=int, default=20, help="how many tasks to keep at most (default 20)")
    synth.add_argument("--seed", type=int, default=0, help="same repo and seed, same task file")
    synth.add_argument(
        "--strategy",
        choices=("body", "function", "file"),
        default="body",
        help="remove a body (keeping signature and docstring), a whole definition, or a small module",
    )
    synth.add_argument(
        "--tests",
        choices=("visible", "hidden"),
        default="visible",
        help="hidden: the failing tests' files are removed from the workspace",
    )
    synth.add_argument("--test-cmd", help="the test command (default: pytest, detected)")
    synth.set_defaults(handler=_synth)

    run = sub.add_parser("run", help="attempt every task with a model and grade each attempt")
    run.add_argument("tasks", type=Path, help="a task file (JSONL) made by `teachback tasks synth`")
    _attempt_options(run)
    run.add_argument(
        "--out",
        type=Path,
        help="results file, appended to and resumed from "
        "(default: <tasks>.<model>.results.jsonl in the current folder)",
    )
    run.set_defaults(handler=_run)

    export = sub.add_parser("export", help="write every task in a format other harnesses run")
    export.add_argument("tasks", type=Path, help="a task file (JSONL) made by `teachback tasks synth`")
    export.add_argument(
        "--harbor",
        type=Path,
        required=True,
        metavar="DIR",
        help="a new folder for one Harbor task folder per task (task.toml, instruction.md, environment/, "
        "tests/, solution/)",
    )
    export.add_argument(
        "--base-image",
        default="python:3.12-slim",
        help="the image each task's Dockerfile starts from; it needs python3 with pytest and git, or a "
        "network to install them (default python:3.12-slim)",
    )
    export.set_defaults(handler=_export)

    branch = sub.add_parser(
        "branch",
        help="sample K replies at every recorded state of a database's task attempts, label each by running "
        "it, and write SFT, DPO and SDPO records",
    )
    branch.add_argument("db", type=Path, help="a feedback database with task attempts of the embedded model")
    branch.add_argument("--out", type=Path, required=True, help="folder for sft.jsonl, dpo.jsonl and sdpo.jsonl")
    branch.add_argument("--samples", type=int, default=4, help="replies per state, seeds 0..K-1 (default 4)")
    branch.add_argument("--tasks", type=Path, help="the attempts' task file (default: the sample suite)")
    branch.add_argument("--max-tokens", type=int, help="tokens per reply (default: each session's max_tokens)")
    branch.add_argument("--model", default="local/smollm2@none", help="the served model (default local/smollm2@none)")
    branch.add_argument("--no-redact", action="store_true", help="keep secrets in the records (default: redacted)")
    add_executor_options(branch, "sessions sampled")
    branch.set_defaults(handler=_branch)


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Score a model on a task suite (pass@k, tool errors, cost, time, flags), or compare two bench runs task by task."
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--tasks", type=Path, help="a task file (JSONL)")
    source.add_argument("--suite", choices=SUITES, help="a suite that ships with teachback (offline)")
    source.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("A.json", "B.json"),
        help="paired per-task difference B − A with a bootstrap confidence interval",
    )
    _attempt_options(parser)
    parser.add_argument(
        "--out",
        type=Path,
        help="the bench JSON (default: bench-<suite or tasks>-<model>.json); "
        "the attempts go beside it as <name>.attempts.jsonl, and a rerun resumes from them",
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.set_defaults(handler=_bench)


def _attempt_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="litellm model string (default: the configured model)")
    parser.add_argument("--attempts", type=int, default=1, help="attempts per task (default 1); pass@k uses k = this")
    add_executor_options(parser, "attempts")
    parser.add_argument("--instance", action="append", default=[], metavar="ID", help="only this task (repeatable)")
    parser.add_argument("--db", help="feedback database (default: $TEACHBACK_HOME/feedback.db)")
    parser.add_argument("--max-steps", type=int, help="model calls per attempt (default: max_steps)")
    parser.add_argument("--max-time", type=float, help="seconds per attempt for the agent (default: max_time)")
    parser.add_argument("--grade-timeout", type=float, help="seconds for the grader's test run")
    parser.add_argument("--work-dir", type=Path, help="where sealed workspaces are made (default: temp dir)")
    parser.add_argument("--keep-workspaces", action="store_true", help="keep each attempt's workspace")
    parser.add_argument(
        "--lessons",
        action="store_true",
        help="show each attempt lessons from the feedback database, as sessions are (default: off, so the "
        "figures measure the model alone; compare a run with and one without)",
    )


def _synth(args: argparse.Namespace) -> int:
    from common.progress import progress_bar
    from tasks.synth import synthesize

    funnels = []
    with progress_bar("validating deletions") as progress:
        made = synthesize(
            args.repo,
            args.out,
            n=args.n,
            seed=args.seed,
            strategy=args.strategy,
            tests=args.tests,
            test_cmd=args.test_cmd,
            progress=progress,
            report=funnels.append,
        )
    for funnel in funnels:
        print(funnel.render())
    print(f"{len(made)} task(s) in {args.out}")
    return EXIT_OK if made else EXIT_FAILED


def _run(args: argparse.Namespace) -> int:
    from tasks.bench import summarize

    model = _model(args)
    out = args.out or Path(f"{args.tasks.stem}.{_slug(model)}.results.jsonl")
    records, _ = _rollouts(args, args.tasks, model, out)
    s = summarize(records, args.attempts)["summary"]
    print(
        f"{s['attempts']} graded attempt(s) on {s['tasks']} task(s): pass@1 {s['pass@1']:.3f}, "
        f"flagged {s['flagged']}, harness errors {s['harness_errors']}. Results: {out}"
    )
    return EXIT_OK if not s["harness_errors"] else EXIT_FAILED


def _export(args: argparse.Namespace) -> int:
    from tasks.harbor import export_harbor
    from tasks.records import load_tasks

    if not args.tasks.is_file():
        raise ValueError(f"{args.tasks} is not a file: give a task file made by `teachback tasks synth`")
    folders = export_harbor(load_tasks(args.tasks), args.tasks, args.harbor, base_image=args.base_image)
    print(f"{len(folders)} Harbor task(s) in {args.harbor}")
    return EXIT_OK if folders else EXIT_FAILED


def _branch(args: argparse.Namespace) -> int:
    from agent.providers.llama_engine import LocalModelError
    from tasks.branches import BranchConfig, render_summary, run_branches
    from tasks.sample_suite import sample_suite_path
    from tasks.states import StateError

    if args.max_tokens is not None and args.max_tokens < 1:
        raise ValueError(f"--max-tokens {args.max_tokens}: give a positive number of tokens")
    config = BranchConfig(
        db=args.db,
        out=args.out,
        task_file=(args.tasks or sample_suite_path()).resolve(),
        model=args.model,
        samples=args.samples,
        cap=args.max_tokens,
        redact=not args.no_redact,
        executor=args.executor,
        parallel=args.parallel,
        address=args.address,
    )
    try:
        result = run_branches(config, say=lambda line: print(line, file=sys.stderr, flush=True))
    except (StateError, LocalModelError) as exc:
        print(f"teachback tasks branch: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(render_summary(result))
    return EXIT_OK


def _bench(args: argparse.Namespace) -> int:
    from tasks import bench

    if args.compare:
        a, b = (bench.load_document(path) for path in args.compare)
        print(bench.render_compare(bench.compare(a, b, seed=args.seed)))
        return EXIT_OK
    if not args.tasks and not args.suite:
        raise ValueError("give --tasks FILE or --suite sample (or --compare A.json B.json)")
    model = _model(args)
    name = args.suite or args.tasks.stem
    out = args.out or Path(f"bench-{name}-{_slug(model)}.json")
    attempts = out.with_name(f"{out.stem}.attempts.jsonl")
    with _task_file(args) as task_file:
        records, seconds = _rollouts(args, task_file, model, attempts)
    document = bench.bench_document(
        bench.summarize(records, args.attempts),
        model=model,
        lessons=args.lessons,
        suite=name,
        tasks_file=str(args.tasks or f"suite:{args.suite}"),
        run_s=round(seconds, 1),
        results=str(attempts),
    )
    bench.write_document(document, out)
    print(bench.render_table(document))
    print(f"\nPer-task results: {out}")
    return EXIT_OK


def _rollouts(args: argparse.Namespace, task_file: Path, model: str, out: Path) -> tuple[list[dict[str, Any]], float]:
    from agent.config import load_settings
    from tasks.executors import ResultsFile, run_all, specs_for
    from tasks.records import load_tasks

    if args.attempts < 1:
        raise ValueError("--attempts must be at least 1")
    chosen = _chosen(load_tasks(task_file), args.instance)
    overrides = {k: v for k, v in (("max_steps", args.max_steps), ("max_time", args.max_time)) if v is not None}
    if args.lessons:
        overrides["lessons"] = True
    settings = load_settings(Path.cwd())
    if settings.local_threads:  # set by the user: kept, instead of the CPUs divided among attempts
        overrides["local_threads"] = settings.local_threads
    db = args.db or str(settings.db_path())
    specs = specs_for(
        chosen,
        args.attempts,
        task_file=str(task_file.resolve()),
        model=model,
        db=db,
        work_dir=str(args.work_dir) if args.work_dir else None,
        overrides=overrides,
        grade_timeout=args.grade_timeout,
        keep_workspace=args.keep_workspaces,
    )
    started = time.perf_counter()
    records = run_all(
        specs,
        ResultsFile(out),
        executor=args.executor,
        parallel=args.parallel,
        address=args.address,
        on_result=_progress,
    )
    return records, time.perf_counter() - started


def _chosen(tasks: list[Any], wanted: list[str]) -> list[Any]:
    if not wanted:
        return tasks
    known = {task.instance_id for task in tasks}
    missing = [w for w in wanted if w not in known]
    if missing:
        raise ValueError(f"no task {', '.join(missing)} in the task file; it has {', '.join(sorted(known))}")
    return [task for task in tasks if task.instance_id in wanted]


def _progress(record: dict[str, Any], count: int, total: int) -> None:
    line = f"[{count}/{total}] {record['instance_id']} #{record['attempt']}: "
    if record.get("error"):
        line += f"harness error: {record['error']}"
    else:
        line += (
            f"reward {record['reward']:g} (FAIL_TO_PASS {record['f2p_pass_fraction']:.0%}, PASS_TO_PASS "
            f"{record['p2p_pass_fraction']:.0%}), {record['steps']} steps, {record['wall_s']:.0f} s"
        )
        if record.get("flags"):
            line += f", FLAGGED: {', '.join(record['flags'])}"
    print(line, file=sys.stderr, flush=True)


def _model(args: argparse.Namespace) -> str:
    if args.model:
        return args.model
    from agent.config import load_settings

    return load_settings(Path.cwd()).model


def _slug(text: str) -> str:
    """A file-name part for a model string (a scripted model by its script's name)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", Path(text).stem if text.startswith("scripted/") else text).strip("-")


def _task_file(args: argparse.Namespace) -> contextlib.AbstractContextManager[Path]:
    if args.tasks:
        return contextlib.nullcontext(args.tasks)
    return resources.as_file(resources.files("tasks").joinpath(f"suites/{args.suite}.jsonl"))
