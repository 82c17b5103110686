"""Validation: run the tests on the original tree and on each mutated tree, in parallel, resumable.

The original runs twice (once traced, to learn which code the tests exercise); a test counts as
passing on the original only when it passed both times, which keeps flaky tests out of
FAIL_TO_PASS. A mutation's FAIL_TO_PASS are the originally passing tests that did not pass with
the code deleted (failed, errored, or never ran); its PASS_TO_PASS the ones that still passed.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.mutate import Mutation
from tasks.records import TaskError
from tasks.testrun import ProcessRegistry, TestCommand, TestRun, run_tests
from tasks.worklog import WorkLog

Progress = Callable[[int, int], None]
Check = Callable[[Mutation], dict[str, Any]]

_TRACER_MODULE = "_teachback_exercised"
# A pytest plugin (loaded with -p, so it starts before any conftest or project import) that
# records the first line of every code object of the tree that ran; line 0 marks a module body.
_TRACER = """
import json, os, sys, threading
_ROOT = os.path.realpath(os.environ["TEACHBACK_TRACE_ROOT"]) + os.sep
_seen = set()
def _profile(frame, event, arg):
    if event == "call":
        _seen.add(frame.f_code)
sys.setprofile(_profile)
threading.setprofile(_profile)
def pytest_unconfigure(config):
    sys.setprofile(None)
    threading.setprofile(None)
    rows = set()
    for code in _seen:
        path = os.path.realpath(code.co_filename)
        if path.startswith(_ROOT):
            line = 0 if code.co_name == "<module>" else code.co_firstlineno
            rows.add((path[len(_ROOT):].replace(os.sep, "/"), line))
    out = os.path.join(os.environ["TEACHBACK_TRACE_OUT"], "%d.json" % os.getpid())
    with open(out, "w") as handle:
        json.dump(sorted(rows), handle)
"""


@dataclass(frozen=True)
class Baseline:
    passing: frozenset[str]
    trace: frozenset[tuple[str, int]] | None  # None: the command is not pytest, nothing traced
    seconds: float

    def to_log(self) -> dict[str, Any]:
        return {
            "passing": sorted(self.passing),
            "seconds": self.seconds,
            "trace": None if self.trace is None else sorted(self.trace),
        }

    @classmethod
    def from_log(cls, data: dict[str, Any]) -> Baseline:
        trace = None if data["trace"] is None else frozenset((p, line) for p, line in data["trace"])
        return cls(frozenset(data["passing"]), trace, data["seconds"])


def run_baseline(
    tree: Path,
    command: TestCommand,
    files: Sequence[str],
    timeout: float,
    python: str | None,
    registry: ProcessRegistry,
) -> Baseline:
    plain = _checked(run_tests(tree, command, timeout, python, files, registry=registry), timeout)
    if not command.is_pytest:
        return Baseline(frozenset(plain.passed()), None, plain.seconds)
    with tempfile.TemporaryDirectory(prefix="teachback-trace-") as scratch:
        plugin_dir, out_dir = Path(scratch, "plugin"), Path(scratch, "out")
        plugin_dir.mkdir()
        out_dir.mkdir()
        (plugin_dir / f"{_TRACER_MODULE}.py").write_text(_TRACER, encoding="utf-8")
        traced = _checked(
            run_tests(
                tree,
                command,
                timeout * 3,
                python,
                files,
                extra_path=[plugin_dir],
                extra_args=["-p", _TRACER_MODULE],
                registry=registry,
                env={"TEACHBACK_TRACE_ROOT": str(tree), "TEACHBACK_TRACE_OUT": str(out_dir)},
            ),
            timeout * 3,
        )
        trace = frozenset(
            (p, line) for f in sorted(out_dir.iterdir()) for p, line in json.loads(f.read_text(encoding="utf-8"))
        )
    return Baseline(frozenset(plain.passed() & traced.passed()), trace, plain.seconds)


def _checked(run: TestRun, timeout: float) -> TestRun:
    if run.timed_out:
        raise TaskError(
            f"the tests of the original tree take longer than {timeout:g} s; raise the "
            f"time limit (--timeout) or narrow the test command (--test-cmd)"
        )
    if not run.passed():
        raise TaskError(
            "no test passes on the original tree, so no deletion can be checked; make "
            "the tests pass (or pass --test-cmd). The end of the output:\n" + run.output[-3000:]
        )
    return run


def check_mutation(
    pristine: Path,
    mutation: Mutation,
    command: TestCommand,
    files: Sequence[str],
    timeout: float,
    python: str | None,
    passing: frozenset[str],
    registry: ProcessRegistry,
) -> dict[str, Any]:
    """Run the tests on a copy of `pristine` with `mutation` made; its FAIL_TO_PASS (sorted)."""
    with tempfile.TemporaryDirectory(prefix="teachback-mutant-") as scratch:
        tree = Path(scratch, "tree")
        shutil.copytree(pristine, tree, symlinks=True)
        target = tree / mutation.candidate.path
        if mutation.mutated is None:
            target.unlink()
        else:
            target.write_bytes(mutation.mutated)
        run = run_tests(tree, command, timeout, python, files, registry=registry)
    return {"f2p": sorted(passing - run.passed()), "seconds": round(run.seconds, 3), "timed_out": run.timed_out}


def is_valid(result: dict[str, Any], passing: frozenset[str]) -> bool:
    """SWE-smith's rule: at least one FAIL_TO_PASS and at least one PASS_TO_PASS."""
    return not result["timed_out"] and 0 < len(result["f2p"]) < len(passing)


@dataclass(frozen=True)
class Funnel:
    """How a synthesis went from the original's tests to the tasks it kept."""

    tests: int  # passing on the original, both runs
    candidates: int  # deletions of definitions the tests exercise
    checked: int  # mutated trees whose tests ran (validation stops once n are kept)
    valid: int  # checked ones with >= 1 FAIL_TO_PASS and >= 1 PASS_TO_PASS
    no_test_failed: int  # the tests did not notice the deletion
    every_test_failed: int  # nothing left to pass: no PASS_TO_PASS
    timed_out: int
    kept: int  # the first n valid ones in seed order
    seconds: float

    @classmethod
    def of(
        cls, results: dict[str, dict[str, Any]], passing: frozenset[str], candidates: int, kept: int, seconds: float
    ) -> Funnel:
        timed_out = [r for r in results.values() if r["timed_out"]]
        finished = [r for r in results.values() if not r["timed_out"]]
        return cls(
            tests=len(passing),
            candidates=candidates,
            checked=len(results),
            valid=sum(is_valid(r, passing) for r in finished),
            no_test_failed=sum(not r["f2p"] for r in finished),
            every_test_failed=sum(len(r["f2p"]) >= len(passing) for r in finished),
            timed_out=len(timed_out),
            kept=kept,
            seconds=round(seconds, 1),
        )

    def render(self) -> str:
        return (
            f"{self.tests} tests pass on the original; {self.candidates} candidates, {self.checked} checked: "
            f"{self.valid} valid, {self.no_test_failed} noticed by no test, {self.every_test_failed} failing "
            f"every test, {self.timed_out} timed out; {self.kept} kept in {self.seconds:g} s"
        )


def validate_all(
    mutations: Sequence[Mutation],
    check: Check,
    worklog: WorkLog,
    passing: frozenset[str],
    n: int | None,
    workers: int,
    progress: Progress | None,
    registry: ProcessRegistry,
) -> dict[str, dict[str, Any]]:
    """Check mutations in their order, `workers` at a time, until the first `n` valid ones in that
    order are known (all, without `n`). Results already in the work log are not run again."""
    results = {
        m.candidate.key: worklog.candidates[m.candidate.key] for m in mutations if m.candidate.key in worklog.candidates
    }
    todo = iter([m for m in mutations if m.candidate.key not in results])

    def enough() -> bool:
        if n is None:
            return False
        found = 0
        for mutation in mutations:
            result = results.get(mutation.candidate.key)
            if result is None:
                return False
            found += is_valid(result, passing)
            if found >= n:
                return True
        return False

    total = len(mutations)
    if progress is not None:
        progress(len(results), total)
    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="teachback-validate")
    running: dict[Future[dict[str, Any]], Mutation] = {}
    try:
        while True:
            while len(running) < workers and not enough():
                mutation = next(todo, None)
                if mutation is None:
                    break
                running[pool.submit(check, mutation)] = mutation
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                key = running.pop(future).candidate.key
                results[key] = future.result()
                worklog.record_candidate(key, results[key])
                if progress is not None:
                    progress(len(results), total)
    except BaseException:
        registry.kill_all()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return results


def default_workers() -> int:
    return os.cpu_count() or 1
