"""Running a repository's tests in isolation, with per-test outcomes read from JUnit XML.

A run uses this interpreter (`sys.executable -m pytest` unless told otherwise), with the tree as
its working folder and its only `PYTHONPATH` entry (plus `src/`), no user site-packages, no
bytecode written, no pytest cache, and a time limit after which its whole process group is killed.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tasks.records import TaskError

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
_SEVERITY = {PASSED: 0, SKIPPED: 1, FAILED: 2, ERROR: 3}
OUTPUT_CAP = 20_000
DEFAULT_TEST_CMD = "python -m pytest"
JUNIT_PLACEHOLDER = "{junit_xml}"
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON_NAMES = ("python", "python3")
# Appended to a pytest command line: JUnit XML with file names, no cache, short tracebacks, and
# the other test files still run when one cannot be imported (its tests then count as errors).
_PYTEST_ARGS = (
    "-p",
    "no:cacheprovider",
    "--rootdir=.",
    "--continue-on-collection-errors",
    "-o",
    "junit_family=xunit1",
    "--tb=short",
    "--color=no",
)


@dataclass(frozen=True)
class TestCommand:
    """A test command line: leading `NAME=value` words set environment variables; `pytest` or
    `python -m pytest` runs this interpreter's pytest with JUnit XML added; any other command must
    write JUnit XML to the path it is given as `{junit_xml}` (and `python` means this interpreter)."""

    __test__ = False  # not a pytest test class, whatever its name
    text: str
    env: tuple[tuple[str, str], ...]
    argv: tuple[str, ...]
    is_pytest: bool

    @classmethod
    def parse(cls, text: str) -> TestCommand:
        try:
            words = shlex.split(text)
        except ValueError as exc:
            raise TaskError(f"cannot read the test command {text!r}: {exc}") from exc
        env = []
        while words and _ENV_ASSIGNMENT.match(words[0]):
            name, _, value = words.pop(0).partition("=")
            env.append((name, value))
        if not words:
            raise TaskError(f"the test command {text!r} names no program; e.g. `{DEFAULT_TEST_CMD}`")
        if words[0] == "pytest":
            return cls(text, tuple(env), tuple(words[1:]), True)
        if words[0] in _PYTHON_NAMES and words[1:3] == ["-m", "pytest"]:
            return cls(text, tuple(env), tuple(words[3:]), True)
        if not any(JUNIT_PLACEHOLDER in w for w in words):
            raise TaskError(
                f"the test command {text!r} is not pytest, so it must write JUnit XML itself: put "
                f"{JUNIT_PLACEHOLDER} where the report's path goes (e.g. `tox -- --junitxml={{junit_xml}}`)"
            )
        return cls(text, tuple(env), tuple(words), False)

    def argv_for(self, python: str, junit_xml: Path, extra: Sequence[str] = ()) -> list[str]:
        if self.is_pytest:
            return [python, "-m", "pytest", *self.argv, *_PYTEST_ARGS, f"--junitxml={junit_xml}", *extra]
        words = [w.replace(JUNIT_PLACEHOLDER, str(junit_xml)) for w in self.argv]
        return [python if words[0] in _PYTHON_NAMES else words[0], *words[1:]]


@dataclass(frozen=True)
class TestRun:
    __test__ = False
    outcomes: dict[str, str]  # test id (pytest node id) -> passed / failed / error / skipped
    output: str
    seconds: float
    timed_out: bool

    def passed(self) -> set[str]:
        return {test for test, outcome in self.outcomes.items() if outcome == PASSED}


class ProcessRegistry:
    """The test processes running now, so that an interrupted synthesis can end them all (each
    runs in its own session, out of reach of the terminal's Ctrl-C)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[bytes]] = set()

    def add(self, process: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._running.add(process)

    def discard(self, process: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._running.discard(process)

    def kill_all(self) -> None:
        with self._lock:
            running = list(self._running)
        for process in running:
            _kill_group(process)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return  # it has already ended


def isolated_env(
    tree: Path | None, command: TestCommand | None = None, extra_path: Iterable[Path] = ()
) -> dict[str, str]:
    """This process's environment less every PYTHON*/PYTEST_* variable, with `tree` (and its
    `src/`) as the whole import path, no user site-packages and no bytecode written."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST_"))}
    path = []
    if tree is not None:
        path = [tree, *([tree / "src"] if (tree / "src").is_dir() else [])]
    path += list(extra_path)
    env.update(PYTHONNOUSERSITE="1", PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0", PYTHONIOENCODING="utf-8")
    if path:
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in path)
    env.update(dict(command.env) if command else {})
    return env


def run_tests(
    tree: Path,
    command: TestCommand,
    timeout: float,
    python: str | None = None,
    files: Iterable[str] = (),
    extra_path: Iterable[Path] = (),
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    registry: ProcessRegistry | None = None,
) -> TestRun:
    """Run the test command in `tree`; outcomes from its JUnit XML (`files`: the tree's files,
    to turn JUnit class names back into node ids)."""
    with tempfile.TemporaryDirectory(prefix="teachback-junit-") as scratch:
        report = Path(scratch) / "junit.xml"
        argv = command.argv_for(python or sys.executable, report, extra_args)
        run_env = {**isolated_env(tree, command, extra_path), **(env or {})}
        started = time.monotonic()
        try:
            process = subprocess.Popen(
                argv,
                cwd=tree,
                env=run_env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            raise TaskError(f"cannot start the test command {command.text!r}: {exc}") from exc
        if registry is not None:
            registry.add(process)
        timed_out = False
        try:
            raw, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(process)
            raw, _ = process.communicate()
        finally:
            if registry is not None:
                registry.discard(process)
        seconds = time.monotonic() - started
        output = raw.decode("utf-8", "replace")
        outcomes, problem = read_junit(report, files)
    if timed_out:
        output += f"\n[teachback: the test run passed its time limit of {timeout:g} s and was killed]"
    elif problem:
        output += f"\n[teachback: {problem}]"
    return TestRun(outcomes, cap_output(output), seconds, timed_out)


def cap_output(text: str, cap: int = OUTPUT_CAP) -> str:
    """The end of `text` (where test runners put their summaries), at most `cap` characters."""
    if len(text) <= cap:
        return text
    return f"[... {len(text) - cap} characters cut ...]\n" + text[-cap:]


def read_junit(report: Path, files: Iterable[str]) -> tuple[dict[str, str], str]:
    """(outcomes by test id, a problem or ""); a missing or broken report gives no outcomes."""
    if not report.is_file():
        return {}, "the test command wrote no JUnit XML report"
    try:
        root = ElementTree.parse(report).getroot()
    except ElementTree.ParseError as exc:
        return {}, f"the JUnit XML report is not readable: {exc}"
    modules = {p[:-3].replace("/", "."): p for p in files if p.endswith(".py")}
    outcomes: dict[str, str] = {}
    for case in root.iter("testcase"):
        test = node_id(case.get("classname", ""), case.get("name", ""), modules)
        outcome = _case_outcome(case)
        if _SEVERITY[outcome] >= _SEVERITY.get(outcomes.get(test, PASSED), 0):
            outcomes[test] = outcome
    return outcomes, ""


def node_id(classname: str, name: str, modules: Mapping[str, str]) -> str:
    """The pytest node id of a JUnit test case: the longest dotted prefix of its class name that
    is a module of the tree becomes the file path (`tests.test_a.TestB` -> `tests/test_a.py::TestB`)."""
    parts = classname.split(".") if classname else []
    for cut in range(len(parts), 0, -1):
        module = modules.get(".".join(parts[:cut]))
        if module is not None:
            return "::".join([module, *parts[cut:], name])
    return "::".join(p for p in (classname, name) if p)


def _case_outcome(case: ElementTree.Element) -> str:
    tags = {child.tag for child in case}
    if "error" in tags:
        return ERROR
    if "failure" in tags:
        return FAILED
    if "skipped" in tags:
        return SKIPPED
    return PASSED


_FIND_SPECS = """
import importlib.util, json, sys
found = {}
for name in sys.argv[1:]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is not None:
        found[name] = spec.origin or " ".join(spec.submodule_search_locations or [])
print(json.dumps(found))
"""


def importable_elsewhere(names: Sequence[str], python: str | None = None) -> dict[str, str]:
    """Which of the top-level import `names` resolve in the test environment with no task tree on
    the path (an installed copy, a .pth file, an editable install, the standard library): name ->
    where."""
    if not names:
        return {}
    with tempfile.TemporaryDirectory(prefix="teachback-empty-") as empty:
        try:
            result = subprocess.run(
                [python or sys.executable, "-c", _FIND_SPECS, *names],
                cwd=empty,
                env=isolated_env(None),
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TaskError(f"cannot check the test environment with {python or sys.executable}: {exc}") from exc
    if result.returncode != 0:
        raise TaskError(
            f"cannot check the test environment with {python or sys.executable}: {result.stderr.strip()[-2000:]}"
        )
    return json.loads(result.stdout)


def ensure_runner(command: TestCommand, python: str | None = None) -> None:
    """Refuse a pytest command when the interpreter the tests run with has no pytest."""
    if command.is_pytest and "pytest" not in importable_elsewhere(["pytest"], python):
        interpreter = python or sys.executable
        raise TaskError(
            f"pytest is not installed for {interpreter}, which runs the tests: install it "
            f"there (`{interpreter} -m pip install pytest`) with the project's other test "
            f"dependencies, but not the project itself"
        )


def ensure_not_installed(packages: Sequence[str], python: str | None = None) -> None:
    """Refuse to run tests where the project itself is importable from outside the task tree: an
    installed copy still holds the code a task deletes."""
    found = importable_elsewhere(packages, python)
    if found:
        where = "; ".join(f"`{name}` from {location}" for name, location in sorted(found.items()))
        raise TaskError(
            f"the project is importable without the task's tree ({where}): an installed copy holds "
            f"the code a task deletes, so an agent could read it and the tests would not test the "
            f"agent's code. Uninstall it (`{python or sys.executable} -m pip uninstall <the "
            f"distribution that provides it>`), or run teachback from a virtual environment that "
            f"has the project's test dependencies but not the project itself."
        )
