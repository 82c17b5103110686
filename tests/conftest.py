"""Shared fixtures: every test gets its own TEACHBACK_HOME, and helpers for git repos and scripts."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

# Before any test module can import torch (torch's OpenMP runtime reads it then): OpenMP threads
# that spin while waiting made a training step 4x slower on two cores shared with other processes
# (74-100 s against 23 s for one forward and backward pass).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from tests.models import embedded_model_dir, tiny_gguf, tiny_model_dir  # noqa: E402, F401  (fixtures for every directory)


@pytest.fixture(autouse=True)
def teachback_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("teachback-home")
    monkeypatch.setenv("TEACHBACK_HOME", str(home))
    for name in ("TEACHBACK_MODEL", "TEACHBACK_APPROVAL", "TEACHBACK_DB", "TEACHBACK_MAX_STEPS"):
        monkeypatch.delenv(name, raising=False)
    return home


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A real git repository with a small Python project, committed on branch main."""
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "dev@example.com")
    git(root, "config", "user.name", "Dev")
    (root / "app.py").write_text("def greet(name):\n    return 'Hello, ' + name\n")
    (root / "util.py").write_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n")
    (root / "old.txt").write_text("obsolete\n")
    (root / ".gitignore").write_text("*.log\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root


def require_installed(path: Path, what: str, install: str) -> None:
    """An optional tool a test drives: skipped, saying how to install it, when `path` is absent here;
    under CI (`CI` set), where `make test` installs it, its absence fails the test instead."""
    if path.exists():
        return
    message = f"{what} is not installed ({path} is missing): {install}"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def call(name: str, arguments: Any, call_id: str | None = None) -> dict[str, Any]:
    """One scripted tool call; `arguments` may be a dict (dumped) or a raw string (sent as is)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    entry: dict[str, Any] = {"function": {"name": name, "arguments": raw}}
    if call_id:
        entry["id"] = call_id
    return entry


def turn(*calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    return {"content": content, "tool_calls": list(calls)}


@pytest.fixture
def script(tmp_path: Path):
    """Write a scripted-model file and return its litellm model string."""

    def write(*turns: dict[str, Any], name: str = "script.json") -> str:
        path = tmp_path / name
        path.write_text(json.dumps(list(turns)))
        return f"scripted/{path}"

    return write


def pytest_configure(config: pytest.Config) -> None:
    """pytest-xdist's `--dist loadfile` hands out files in the order of the collection below, not
    reordered by how many tests each holds: by that count (its default), the few-test files that run
    the embedded model for minutes started last, and one worker ran them alone at the end."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    _give_each_worker_its_own_cores()


def _give_each_worker_its_own_cores() -> None:
    """Each xdist worker runs on cores of its own. llama.cpp and torch start a thread per core they
    may use and llama.cpp's threads spin at each step: two workers of two threads each on two cores
    ran the embedded model 2.7x slower than two workers of one thread each. The model's thread count
    follows the process's affinity (`usable_cpus`), so narrowing the affinity sets both."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if not worker.startswith("gw") or count < 2 or not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    share = len(cpus) // count
    if share < 1:
        return  # more workers than cores: the scheduler shares them out
    index = int(worker[2:]) % count  # a worker that replaces one that died is numbered past the count
    os.sched_setaffinity(0, cpus[index * share : (index + 1) * share])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files with tests of the real model run first, then the files with other slow tests, then the
    rest, each file's tests still together and in order: with one worker per core (`make test`), the
    longest files start at once and the short ones fill in at the end."""
    rank: dict[Path, int] = {}
    for item in items:
        weight = 0 if item.get_closest_marker("real_model") else 1 if item.get_closest_marker("slow") else 2
        rank[item.path] = min(rank.get(item.path, 2), weight)
    items.sort(key=lambda item: rank[item.path])
