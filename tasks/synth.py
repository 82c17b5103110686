"""`teachback tasks synth`: tasks made by deleting features from a repository whose tests pass.

    snapshot the project's files -> run its tests twice (one traced) -> candidates the tests
    exercise -> one deletion each, in an order fixed by the seed -> run the tests on each mutated
    tree (in parallel, logged for resuming) -> keep the first n with >= 1 FAIL_TO_PASS and >= 1
    PASS_TO_PASS -> tasks.jsonl, snapshots/, gold/

The same repository, settings and seed give a byte-identical task file.
"""

from __future__ import annotations

import logging
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tasks.candidates import find_candidates
from tasks.mutate import Mutation, gold_patch, mutate
from tasks.records import STRATEGIES, TEST_VISIBILITY, Task, TaskError, write_tasks
from tasks.snapshot import extract_snapshot, is_test_path, list_files, project_packages, write_snapshot
from tasks.statement import problem_statement
from tasks.testrun import DEFAULT_TEST_CMD, ProcessRegistry, TestCommand, ensure_not_installed, ensure_runner
from tasks.validate import (
    Baseline,
    Funnel,
    Progress,
    check_mutation,
    default_workers,
    is_valid,
    run_baseline,
    validate_all,
)
from tasks.worklog import WorkLog

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 300.0
GOLD_DIR = "gold"
TASK_FILE = "tasks.jsonl"


def synthesize(
    repo: Path,
    out: Path,
    n: int | None = None,
    seed: int = 0,
    strategy: str = "body",
    tests: str = "visible",
    test_cmd: str | None = None,
    progress: Progress | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    workers: int | None = None,
    python: str | None = None,
    name: str | None = None,
    task_file: str = TASK_FILE,
    report: Callable[[Funnel], None] | None = None,
) -> list[Task]:
    """Make up to `n` tasks (all that validate, without `n`) from `repo` into the folder `out`.
    `python` is the interpreter the tests run with (this one by default); `report` is given the
    funnel from candidates to kept tasks."""
    started = time.monotonic()
    repo, out = Path(repo), Path(out)
    _check_arguments(repo, n, strategy, tests, timeout)
    files = list_files(repo)
    command = TestCommand.parse(test_cmd or detect_test_cmd(repo, files))
    packages = project_packages(files)
    ensure_not_installed(packages, python)
    ensure_runner(command, python)
    out.mkdir(parents=True, exist_ok=True)
    base_hash, snapshot = write_snapshot(repo, files, out)
    repo_name = re.sub(r"[^A-Za-z0-9_.-]", "_", name or repo.resolve().name)
    config = {
        "base_hash": base_hash,
        "test_cmd": command.text,
        "strategy": strategy,
        "timeout": timeout,
        "python": python or sys.executable,
    }
    worklog = WorkLog(out / f"{Path(task_file).stem}.worklog.jsonl", config)
    registry = ProcessRegistry()
    with tempfile.TemporaryDirectory(prefix="teachback-synth-") as scratch:
        pristine = Path(scratch, "tree")
        extract_snapshot(out, snapshot, base_hash, pristine)
        if worklog.baseline is None:
            baseline = run_baseline(pristine, command, files, timeout, python, registry)
            worklog.record_baseline(baseline.to_log())
        baseline = Baseline.from_log(worklog.baseline)
        mutations = _mutations(pristine, files, strategy, baseline, seed)
        log.info("%s: %d tests pass on the original; %d candidates", repo, len(baseline.passing), len(mutations))

        def check(mutation: Mutation) -> dict[str, Any]:
            return check_mutation(pristine, mutation, command, files, timeout, python, baseline.passing, registry)

        results = validate_all(
            mutations, check, worklog, baseline.passing, n, workers or default_workers(), progress, registry
        )
    kept = _first_valid(mutations, results, baseline.passing, n)
    common = {
        "repo": repo_name,
        "base_hash": base_hash,
        "test_cmd": command.text,
        "timings": {"test_timeout": timeout},
        "snapshot": snapshot,
        "packages": packages,
        "test_files": tuple(p for p in files if is_test_path(p)),
        "tests": tests,
    }
    tasks = _tasks(kept, results, baseline.passing, common)
    for mutation, task in zip(kept, tasks, strict=True):
        gold = out / task.gold_patch
        gold.parent.mkdir(parents=True, exist_ok=True)
        gold.write_text(gold_patch(mutation), encoding="utf-8", errors="surrogateescape")
    tasks.sort(key=lambda t: t.instance_id)
    write_tasks(out / task_file, tasks)
    worklog.remove()
    if report is not None:
        report(Funnel.of(results, baseline.passing, len(mutations), len(tasks), time.monotonic() - started))
    return tasks


def _check_arguments(repo: Path, n: int | None, strategy: str, tests: str, timeout: float) -> None:
    if not repo.is_dir():
        raise TaskError(f"{repo} is not a folder: pass the repository's folder")
    if strategy not in STRATEGIES:
        raise TaskError(f"unknown strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
    if tests not in TEST_VISIBILITY:
        raise TaskError(f"tests={tests!r}: use 'visible' or 'hidden'")
    if n is not None and n < 1:
        raise TaskError(f"n={n}: ask for at least one task (or leave it out for all)")
    if not timeout > 0:
        raise TaskError(f"timeout={timeout}: the time limit per test run must be positive")


def detect_test_cmd(repo: Path, files: list[str]) -> str:
    """pytest, when the repository has pytest-style test files or pytest configuration."""
    if any(is_test_path(p) and p.endswith(".py") for p in files):
        return DEFAULT_TEST_CMD
    raise TaskError(
        f"no tests found in {repo} (files named test_*.py or *_test.py, or under "
        "tests/); pass --test-cmd with a command that writes JUnit XML to {junit_xml}"
    )


def _mutations(tree: Path, files: list[str], strategy: str, baseline: Baseline, seed: int) -> list[Mutation]:
    """One deletion per candidate, in the order the seed fixes."""
    found = []
    sources: dict[str, bytes] = {}
    for candidate in find_candidates(tree, files, strategy, baseline.trace):
        source = sources.setdefault(candidate.path, (tree / candidate.path).read_bytes())
        mutation = mutate(candidate, source, strategy)
        if mutation is not None:
            found.append(mutation)
    random.Random(seed).shuffle(found)
    return found


def _first_valid(
    mutations: list[Mutation], results: dict[str, dict[str, Any]], passing: frozenset[str], n: int | None
) -> list[Mutation]:
    """The first `n` valid mutations in order (validation checked every one before the n-th)."""
    kept: list[Mutation] = []
    for mutation in mutations:
        result = results.get(mutation.candidate.key)
        if result is None or len(kept) == n:
            break
        if is_valid(result, passing):
            kept.append(mutation)
    return kept


def _tasks(
    kept: list[Mutation], results: dict[str, dict[str, Any]], passing: frozenset[str], common: dict[str, Any]
) -> list[Task]:
    tasks = []
    used: set[str] = set()
    for mutation in kept:
        f2p = tuple(results[mutation.candidate.key]["f2p"])
        instance_id = _instance_id(common["repo"], common["base_hash"], mutation, used)
        tasks.append(
            Task(
                instance_id=instance_id,
                strategy=mutation.strategy,
                problem_statement=problem_statement(mutation, f2p, common["tests"]),
                FAIL_TO_PASS=f2p,
                PASS_TO_PASS=tuple(sorted(passing - set(f2p))),
                deleted=(mutation.deleted,),
                gold_patch=f"{GOLD_DIR}/{instance_id}.patch",
                **common,
            )
        )
    return tasks


def _instance_id(repo: str, base_hash: str, mutation: Mutation, used: set[str]) -> str:
    """SWE-smith's shape: `<repo>.<base>.<strategy>__<what>`, e.g. `textkit.1a2b3c4d.body__textkit.slug.slugify`."""
    candidate = mutation.candidate
    module = candidate.path.rsplit(".", 1)[0].replace("/", ".")
    what = module if candidate.kind == "module" else f"{module}.{candidate.qualname}"
    instance_id = f"{repo}.{base_hash[:8]}.{mutation.strategy}__{re.sub(r'[^A-Za-z0-9_.-]', '_', what)}"
    if instance_id in used:  # a name defined twice (a property and its setter)
        instance_id += f"_L{candidate.def_line}"
    used.add(instance_id)
    return instance_id
