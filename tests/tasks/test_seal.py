"""Sealed workspaces: one test per leak (plant it in the source repository, show it gone)."""

from __future__ import annotations

import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from tasks.grade import grade
from tasks.records import Task, TaskError
from tasks.seal import make_workspace
from tasks.synth import synthesize
from tests.tasks.synth_helpers import (
    FAST_CMD,
    SAMPLE_PROJECT,
    all_objects,
    copy_project,
    git,
    venv_with_project_installed,
)

BODY_MARKER = "secret-body-7f3a9c"
HISTORY_MARKERS = ("old-body-2b1d", "tagged-body-c0de", "stash-body-91e0", "branch-body-55aa")
CACHE_MARKER = "cache-leak-e4d2"
CACHES = [
    "textkit/__pycache__/slug.cpython-311.pyc",
    "textkit/slug.pyc",
    ".mypy_cache/3.11/textkit/slug.data.json",
    ".pytest_cache/v/cache/lastfailed",
    ".ruff_cache/0.4.1/1234567",
    "build/lib/textkit/slug.py",
    "dist/textkit-0.1.tar.gz",
    "textkit.egg-info/SOURCES.txt",
    ".tox/py311/lib/python3.11/site-packages/textkit/slug.py",
    ".coverage",
    ".coverage.host.1234.XyZ",
    "htmlcov/slug_py.html",
    ".hypothesis/examples/0a1b/2c3d",
    "devenv/pyvenv.cfg",
    "devenv/lib/python3.11/site-packages/textkit/slug.py",
]
TRACKED_BY_MISTAKE = "textkit/__pycache__/words.cpython-311.pyc"


def _slug(marker: str) -> str:
    return f'def slugify(title):\n    """URL slug."""\n    return "-".join(title.split())  # {marker}\n'


@dataclass(frozen=True)
class Sealed:
    source: Path
    task: Task
    task_file: Path
    workspace: Path


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Sealed:
    """A source repository with the deleted body's older versions in its history, a tag, a stash,
    another branch, a remote, and caches and build outputs holding the body; its slugify task."""
    base = tmp_path_factory.mktemp("seal")
    source = copy_project(SAMPLE_PROJECT, base / "source")
    slug = source / "textkit" / "slug.py"
    git(source, "init", "-q", "-b", "main")
    git(source, "config", "user.email", "dev@example.com")
    git(source, "config", "user.name", "Dev")
    for index, marker in enumerate(HISTORY_MARKERS[:2]):
        slug.write_text(_slug(marker))
        git(source, "add", "-A")
        git(source, "commit", "-q", "-m", f"version {index}")
    git(source, "tag", "v1")
    git(source, "branch", "feature")
    git(source, "checkout", "-q", "feature")
    slug.write_text(_slug(HISTORY_MARKERS[3]))
    git(source, "commit", "-q", "-am", "feature")
    git(source, "checkout", "-q", "main")
    slug.write_text(_slug(BODY_MARKER))
    git(source, "commit", "-q", "-am", "current")
    slug.write_text(_slug(HISTORY_MARKERS[2]))
    git(source, "stash", "-q")
    git(source, "remote", "add", "origin", "https://example.com/textkit.git")
    for path in [*CACHES, TRACKED_BY_MISTAKE]:
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_text(f"{CACHE_MARKER}\n{_slug(BODY_MARKER)}")
    git(source, "add", "-f", TRACKED_BY_MISTAKE)
    git(source, "commit", "-q", "-m", "oops, bytecode")
    out = base / "tasks"
    tasks = synthesize(source, out, test_cmd=FAST_CMD)
    task = next(t for t in tasks if t.instance_id.endswith("slugify"))
    workspace = make_workspace(task, out / "tasks.jsonl", base / "workspace")
    return Sealed(source, task, out / "tasks.jsonl", workspace)


def _workspace_text(workspace: Path) -> str:
    return "\n".join(
        p.read_text(errors="replace")
        for p in workspace.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(workspace).parts
    )


def test_no_object_of_the_source_repository_reaches_the_workspace(sealed: Sealed) -> None:
    source_objects = all_objects(sealed.source)
    assert all(m.encode() in source_objects for m in (BODY_MARKER, *HISTORY_MARKERS))
    objects = all_objects(sealed.workspace)
    for marker in (BODY_MARKER, *HISTORY_MARKERS, CACHE_MARKER):
        assert marker.encode() not in objects, marker
        assert marker not in _workspace_text(sealed.workspace), marker
    assert b"join(title.split())" not in objects
    assert "raise NotImplementedError" in (sealed.workspace / "textkit" / "slug.py").read_text()


def test_one_commit_and_no_tags_reflog_remotes_stash_or_hooks(sealed: Sealed) -> None:
    ws = sealed.workspace
    assert git(ws, "rev-list", "--all", "--count").strip() == b"1"
    assert git(ws, "for-each-ref", "--format=%(refname)").split() == [b"refs/heads/main"]
    assert git(ws, "tag") == git(ws, "remote") == git(ws, "stash", "list") == git(ws, "reflog") == b""
    assert not (ws / ".git" / "logs").exists()
    assert not (ws / ".git" / "hooks").exists() or not any((ws / ".git" / "hooks").iterdir())
    reachable = git(ws, "rev-list", "--objects", "--all").splitlines()
    stored = git(ws, "cat-file", "--batch-all-objects", "--batch-check").splitlines()
    assert len(stored) == len(reachable)
    assert git(ws, "status", "--porcelain") == b""


@pytest.mark.parametrize("planted", [*CACHES, TRACKED_BY_MISTAKE])
def test_caches_and_build_outputs_are_gone(sealed: Sealed, planted: str) -> None:
    assert (sealed.source / planted).is_file()
    assert not (sealed.workspace / planted).exists()
    with tarfile.open(sealed.task_file.parent / sealed.task.snapshot) as tar:
        assert planted not in tar.getnames()


def test_the_deleted_code_and_the_task_files_stay_outside(sealed: Sealed) -> None:
    names = {p.name for p in sealed.workspace.rglob("*")}
    assert not any(n.endswith((".tar", ".patch", ".jsonl")) for n in names)
    assert "join(title.split())" not in _workspace_text(sealed.workspace)
    assert sealed.task.problem_statement.count(BODY_MARKER) == 0


def test_an_installed_copy_of_the_project_is_refused(sealed: Sealed, tmp_path: Path) -> None:
    python = venv_with_project_installed(tmp_path / "venv", sealed.source)
    with pytest.raises(TaskError, match=r"`textkit` from .*virtual environment"):
        grade(sealed.task, sealed.task_file, sealed.workspace, python=python)


def test_hidden_tests_leave_out_the_failing_tests_files(sealed: Sealed, tmp_path: Path) -> None:
    hidden = make_workspace(sealed.task, sealed.task_file, tmp_path / "hidden", tests="hidden")
    assert sealed.task.f2p_files == ("tests/test_slug.py",)
    assert not (hidden / "tests" / "test_slug.py").exists()
    assert (hidden / "tests" / "test_words.py").is_file()
    assert (sealed.workspace / "tests" / "test_slug.py").is_file()
    assert "test_slug" not in git(hidden, "ls-files").decode()


def test_every_attempt_needs_a_fresh_folder(sealed: Sealed) -> None:
    with pytest.raises(TaskError, match="fresh workspace"):
        make_workspace(sealed.task, sealed.task_file, sealed.workspace)


def test_a_changed_snapshot_is_refused(sealed: Sealed, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    (copy / "snapshots").mkdir(parents=True)
    snapshot = sealed.task_file.parent / sealed.task.snapshot
    (copy / sealed.task.snapshot).write_bytes(snapshot.read_bytes() + b"\0")
    with pytest.raises(TaskError, match="does not match base_hash"):
        make_workspace(sealed.task, copy / "tasks.jsonl", tmp_path / "ws")
