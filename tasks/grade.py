"""Grading an attempt: the task's original tests, run on the agent's code.

The graded tree is the workspace's files less its test files and test configuration, plus those
taken from the task's pristine snapshot, so editing, adding or deleting tests gains nothing. Files
the agent added that would run before or instead of the tests (a `sitecustomize.py`, a module
that shadows an installed one such as `pytest.py`) are left out and named in the output.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tasks.records import Task, test_file
from tasks.snapshot import extract_snapshot, is_build_output, is_test_path
from tasks.testrun import ERROR, PASSED, TestCommand, cap_output, ensure_not_installed, importable_elsewhere, run_tests

_STARTUP_HOOKS = frozenset({"sitecustomize.py", "usercustomize.py"})


@dataclass(frozen=True)
class Grade:
    reward: float  # 1.0 iff every FAIL_TO_PASS passes and every PASS_TO_PASS still passes
    f2p_pass_fraction: float
    p2p_pass_fraction: float
    outcomes: dict[str, str]  # FAIL_TO_PASS and PASS_TO_PASS ids -> outcome ("error": never ran)
    output: str
    seconds: float


def grade(
    task: Task, task_file: Path, workspace: Path, timeout: float | None = None, *, python: str | None = None
) -> Grade:
    """Run the task's original tests on the code in `workspace` (the time limit: `timeout`, or
    the task's own)."""
    started = time.monotonic()
    limit = timeout if timeout is not None else float(task.timings["test_timeout"])
    ensure_not_installed(task.packages, python)
    with tempfile.TemporaryDirectory(prefix="teachback-grade-") as scratch:
        pristine, tree = Path(scratch, "pristine"), Path(scratch, "tree")
        extract_snapshot(Path(task_file).parent, task.snapshot, task.base_hash, pristine)
        protected = protected_files(task)
        left_out = _copy_code(Path(workspace), tree, protected, pristine, python)
        for path in sorted(protected):
            source = pristine / path
            if source.is_file():
                (tree / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, tree / path)
        files = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file())
        run = run_tests(tree, TestCommand.parse(task.test_cmd), limit, python, files)
    outcomes = {test: run.outcomes.get(test, ERROR) for test in task.FAIL_TO_PASS + task.PASS_TO_PASS}
    f2p = _fraction(outcomes, task.FAIL_TO_PASS)
    p2p = _fraction(outcomes, task.PASS_TO_PASS)
    note = "".join(f"[teachback: left out {path}: {why}]\n" for path, why in left_out)
    return Grade(
        reward=1.0 if f2p == 1.0 and p2p == 1.0 else 0.0,
        f2p_pass_fraction=f2p,
        p2p_pass_fraction=p2p,
        outcomes=outcomes,
        output=cap_output(note + run.output),
        seconds=time.monotonic() - started,
    )


def protected_files(task: Task) -> set[str]:
    """The files grading takes from the snapshot: test files and test configuration. Never a file
    the task deleted code from (that would hand back the answer), nor a module whose doctests are
    among the task's tests."""
    test_ids = task.FAIL_TO_PASS + task.PASS_TO_PASS
    files = set(task.test_files) | {f for f in map(test_file, test_ids) if is_test_path(f)}
    return files - {item.path for item in task.deleted}


def _fraction(outcomes: dict[str, str], tests: tuple[str, ...]) -> float:
    return sum(outcomes[t] == PASSED for t in tests) / len(tests) if tests else 1.0


def _copy_code(
    workspace: Path, tree: Path, protected: set[str], pristine: Path, python: str | None
) -> list[tuple[str, str]]:
    """Copy the workspace's code into `tree`: everything but tests, test configuration, build
    outputs, links that leave the workspace and files that run before the tests; what was left
    out, and why."""
    base = workspace.resolve()
    left_out: list[tuple[str, str]] = []
    added_top: dict[str, str] = {}
    for directory, dirs, names in os.walk(workspace):
        rel = Path(directory).relative_to(workspace).as_posix()
        prefix = "" if rel == "." else rel + "/"
        dirs[:] = [d for d in dirs if not is_build_output(f"{prefix}{d}/x")]
        for name in names:
            path = prefix + name
            source = Path(directory, name)
            if is_build_output(path) or path in protected or is_test_path(path):
                continue
            if source.is_symlink() and not source.resolve().is_relative_to(base):
                left_out.append((path, "a link that leads out of the workspace"))
                continue
            if name in _STARTUP_HOOKS:
                left_out.append((path, "Python runs it at start-up, before the tests"))
                continue
            if not source.is_file():
                left_out.append((path, "not a regular file"))
                continue
            top = _new_top_level(path, pristine)
            if top is not None:
                added_top.setdefault(*top)
            (tree / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, tree / path, follow_symlinks=True)
    for name, where in sorted(importable_elsewhere(sorted(added_top), python).items()):
        left_out.append((added_top[name], f"it shadows the installed module `{name}` ({where})"))
        target = tree / added_top[name]
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink()
    return left_out


def _new_top_level(path: str, pristine: Path) -> tuple[str, str] | None:
    """(import name, top-level path) of a module or package the agent added at the top of the
    import path (the tree or its `src/`); None for anything else."""
    parts = path.split("/")
    depth = 1 if parts[0] == "src" and len(parts) > 1 else 0
    first = parts[depth]
    if len(parts) == depth + 1:
        if not first.endswith(".py"):
            return None
        first = first[:-3]
    top = "/".join(parts[: depth + 1])
    if not first.isidentifier() or (pristine / top).exists():
        return None
    return first, top
