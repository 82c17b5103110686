"""Sealed workspaces: a fresh git repository holding one commit of the mutated tree.

Nothing of the original can be read back from it: the tree comes from the task's snapshot (the
project's files only), the deleted code is cut before anything is committed, git starts from an
empty template with no global or system configuration (so no history, tags, reflog, remotes,
stash, hooks or objects other than that one commit), and caches, bytecode and build outputs are
removed. With `tests="hidden"` the files of the FAIL_TO_PASS tests are removed as well.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tasks.mutate import apply_deleted
from tasks.records import TEST_VISIBILITY, Task, TaskError
from tasks.snapshot import extract_snapshot, is_test_path, strip_build_outputs

COMMIT_MESSAGE = "Task workspace"
# Fixed identity and dates: the workspace commit says nothing about where or when it was made.
_GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "teachback",
    "GIT_AUTHOR_EMAIL": "tasks@teachback.invalid",
    "GIT_COMMITTER_NAME": "teachback",
    "GIT_COMMITTER_EMAIL": "tasks@teachback.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}


def make_workspace(task: Task, task_file: Path, dest: Path, tests: str = "visible") -> Path:
    """Build the sealed workspace of `task` at `dest` (a new or empty folder) and return it."""
    if tests not in TEST_VISIBILITY:
        raise TaskError(f"tests={tests!r}: use 'visible' or 'hidden'")
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise TaskError(
            f"{dest} already exists and is not an empty folder: every attempt needs a fresh workspace; pass a new path"
        )
    extract_snapshot(Path(task_file).parent, task.snapshot, task.base_hash, dest)
    apply_deleted(dest, task.deleted)
    strip_build_outputs(dest)
    if tests == "hidden":
        for path in task.f2p_files:
            if is_test_path(path):  # a doctest's node id names a source module: it stays
                (dest / path).unlink(missing_ok=True)
    commit_tree(dest)
    return dest


def git_env() -> dict[str, str]:
    """Git with no system or global configuration (no templates, hooks or credential helpers)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(_GIT_IDENTITY, GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0")
    return env


def commit_tree(root: Path, message: str = COMMIT_MESSAGE) -> None:
    """Make `root` a new repository with one commit of everything in it, and no reflog (ref
    logging is off before the first commit)."""
    env = git_env()
    if (root / ".git").exists():
        raise TaskError(f"{root} already holds a .git; a workspace must start without one")
    _git(root, env, "init", "-q", "--template=", "-b", "main")
    _git(root, env, "config", "core.logAllRefUpdates", "false")
    _git(root, env, "add", "-A", "--force")
    _git(root, env, "commit", "-q", "--no-verify", "--no-gpg-sign", "--allow-empty", "-m", message)


def _git(root: Path, env: dict[str, str], *args: str) -> None:
    try:
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, timeout=300)
    except FileNotFoundError as exc:
        raise TaskError("git is not installed: workspaces are git repositories; install git") from exc
    except subprocess.CalledProcessError as exc:
        raise TaskError(f"git {args[0]} failed in {root}: {exc.stderr.decode(errors='replace').strip()}") from exc
