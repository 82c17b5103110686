"""Helpers for the task tests: copies of the sample project, git, a venv with the project installed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tasks.sample_suite import TEST_CMD

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_PROJECT = ROOT / "agent" / "sample_project"
TEXTKIT = ROOT / "tasks" / "suites" / "textkit"
FAST_CMD = TEST_CMD  # pytest without third-party plugins: the sample needs none


def copy_project(source: Path, dest: Path) -> Path:
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    return dest


def git(root: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, input=stdin).stdout


def all_objects(repo: Path) -> bytes:
    """The content of every object in a repository's object store, reachable or not."""
    return git(repo, "cat-file", "--batch-all-objects", "--batch")


def venv_with_project_installed(dest: Path, project: Path) -> str:
    """A virtual environment whose site-packages has a .pth file putting `project` on the path
    (as an editable install does); its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True)
    python = str(dest / "bin" / "python")
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(purelib, "project.pth").write_text(f"{project}\n")
    return python
