"""Synthesised tasks as Harbor tasks (harborframework.com/docs/task-format), one folder each:

task.toml               name, time limits, the task's test ids as metadata
instruction.md          the task's statement
environment/Dockerfile  the sealed workspace (feature deleted, history scrubbed) copied to /app
environment/workspace/  that workspace's files, the build context of the Dockerfile
tests/test.sh           runs tests/verify.py: the reward to /logs/verifier/reward.txt, and the
                        reward-hacking monitor's flags beside it (a flagged trial scores 0)
solution/solve.sh       applies solution/gold.patch, the deleted code
"""

from __future__ import annotations

import json
import re
import shutil
import tarfile
import tempfile
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

from tasks.grade import protected_files
from tasks.records import Task, TaskError
from tasks.seal import make_workspace
from tasks.snapshot import extract_snapshot

# The image must give python3 with pytest, and git (the oracle applies the gold patch with it);
# each RUN is a no-op on a base image that has them, so a prepared offline image needs no network.
DEFAULT_BASE_IMAGE = "python:3.12-slim"  # cli.tasks names it in its help
AGENT_TIMEOUT_S = 1800.0
# The verifier's own modules travel with it: teachback's test runner and monitor, by module path.
_VERIFIER_MODULES = (
    ("tasks", "testrun.py"),
    ("tasks", "records.py"),
    ("feedback_store.recording", "monitor.py"),
    ("agent.protocol", "roles.py"),
)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

_DOCKERFILE = """\
FROM {base}
RUN python3 -m pytest --version >/dev/null 2>&1 || python3 -m pip install --no-cache-dir pytest
RUN command -v git >/dev/null 2>&1 || (apt-get update && apt-get install -y --no-install-recommends git \\
    && rm -rf /var/lib/apt/lists/*)
COPY workspace/ /app/
WORKDIR /app
"""

_TEST_SH = """\
#!/bin/bash
# Grades the code in /app with the task's original tests; writes reward.txt, flags.json and
# grade.json to /logs/verifier. A verifier that cannot run leaves reward 0. Outside Harbor, the
# variables below point it at another workspace, logs folder and interpreter.
tests="$(cd "$(dirname "$0")" && pwd)"
logs="${TEACHBACK_VERIFIER_LOGS:-/logs/verifier}"
mkdir -p "$logs"
echo 0 > "$logs/reward.txt"
"${TEACHBACK_PYTHON:-python3}" "$tests/verify.py" "$tests" "${TEACHBACK_WORKSPACE:-/app}" "$logs"
"""

_SOLVE_SH = """\
#!/bin/bash
# Puts the deleted code back: the task's gold patch. TEACHBACK_WORKSPACE names another workspace.
set -euo pipefail
solution="$(cd "$(dirname "$0")" && pwd)"
cd "${TEACHBACK_WORKSPACE:-/app}"
git apply --whitespace=nowarn "$solution/gold.patch"
"""


def export_harbor(
    tasks: Iterable[Task], task_file: Path, out: Path, base_image: str = DEFAULT_BASE_IMAGE
) -> list[Path]:
    """Write each task as a Harbor task folder `out/<instance_id>`; `out` must be new or empty,
    and holds those folders only."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise TaskError(f"{out} already exists and is not an empty folder: pass a new path for the Harbor tasks")
    tasks = list(tasks)
    for task in tasks:
        if not _NAME.match(task.instance_id):
            raise TaskError(f"task id {task.instance_id!r} cannot name a folder; regenerate the task file")
    out.mkdir(parents=True, exist_ok=True)
    return [_export_one(task, Path(task_file), out / task.instance_id, base_image) for task in tasks]


def _export_one(task: Task, task_file: Path, folder: Path, base_image: str) -> Path:
    workspace = folder / "environment" / "workspace"
    make_workspace(task, task_file, workspace, tests=task.tests)
    (folder / "environment" / "Dockerfile").write_text(_DOCKERFILE.format(base=base_image), encoding="utf-8")
    (folder / "instruction.md").write_text(task.problem_statement, encoding="utf-8")
    (folder / "task.toml").write_text(task_toml(task), encoding="utf-8")
    _write_tests(task, task_file, folder / "tests", workspace)
    solution = folder / "solution"
    solution.mkdir()
    shutil.copyfile(task_file.parent / task.gold_patch, solution / "gold.patch")
    _script(solution / "solve.sh", _SOLVE_SH)
    return folder


def task_toml(task: Task) -> str:
    """task.toml in Harbor's schema 1.4; strings are JSON-quoted, which TOML reads as basic strings."""
    q = json.dumps
    test_timeout = float(task.timings["test_timeout"])
    lines = [
        'schema_version = "1.4"',
        "",
        "[task]",
        f"name = {q(f'teachback/{task.instance_id}')}",
        f"description = {q(f'Restore the code deleted from {task.repo} ({task.strategy})')}",
        f"keywords = {q(['teachback', 'feature-deletion', task.strategy])}",
        "",
        "[metadata]",
        f"instance_id = {q(task.instance_id)}",
        f"repo = {q(task.repo)}",
        f"base_hash = {q(task.base_hash)}",
        f"strategy = {q(task.strategy)}",
        f"FAIL_TO_PASS = {q(list(task.FAIL_TO_PASS))}",
        f"PASS_TO_PASS = {q(list(task.PASS_TO_PASS))}",
        "",
        "[verifier]",
        f"timeout_sec = {test_timeout * 2 + 60:.1f}",
        "",
        "[agent]",
        f"timeout_sec = {AGENT_TIMEOUT_S:.1f}",
        "",
        "[environment]",
        "build_timeout_sec = 600.0",
        'workdir = "/app"',
        "",
    ]
    return "\n".join(lines)


def _write_tests(task: Task, task_file: Path, tests: Path, workspace: Path) -> None:
    protected = sorted(protected_files(task))
    with tempfile.TemporaryDirectory(prefix="teachback-harbor-") as scratch:
        pristine = Path(scratch)
        extract_snapshot(task_file.parent, task.snapshot, task.base_hash, pristine)
        for path in protected:
            if (pristine / path).is_file():
                (tests / "protected" / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(pristine / path, tests / "protected" / path)
    present = [p for p in protected if (tests / "protected" / p).is_file()]
    spec = {
        "instance_id": task.instance_id,
        "test_cmd": task.test_cmd,
        "test_timeout": float(task.timings["test_timeout"]),
        "FAIL_TO_PASS": list(task.FAIL_TO_PASS),
        "PASS_TO_PASS": list(task.PASS_TO_PASS),
        "protected": present,
    }
    (tests / "task.json").write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
    with tarfile.open(tests / "sealed.tar", "w") as archive:
        for path in sorted(workspace.rglob("*")):
            relative = path.relative_to(workspace)
            if path.is_file() and relative.parts[0] != ".git":
                archive.add(path, relative.as_posix(), recursive=False)
    for package, name in (*_VERIFIER_MODULES, ("tasks", "harbor_verify.py")):
        text = resources.files(package).joinpath(name).read_text(encoding="utf-8")
        if name == "harbor_verify.py":
            (tests / "verify.py").write_text(text, encoding="utf-8")
            continue
        # no __init__.py: namespace packages, so importing a module runs none of teachback's own
        target = tests / "lib" / Path(*package.split(".")) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    _script(tests / "test.sh", _TEST_SH)


def _script(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    path.chmod(0o755)
