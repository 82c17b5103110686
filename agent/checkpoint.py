"""Checkpoints before the agent's first edit of a turn, and `undo` back to the last one.

In a git repository the whole working tree (tracked and untracked, not ignored) is snapshotted into
a commit on a private ref, `refs/teachback/checkpoints`, through a temporary index: the user's
branch, index and stash are never touched. Each checkpoint's parent is the previous checkpoint, so
undo pops one at a time. Outside git — and, in git, for files .gitignore hides from the snapshot —
a journal under $TEACHBACK_HOME keeps the before-contents of every file the turn touched.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from agent.config import teachback_home

REF = "refs/teachback/checkpoints"


class UndoError(Exception):
    pass


def is_git_repo(root: Path) -> bool:
    return _git(root, "rev-parse", "--is-inside-work-tree", check=False).strip() == "true"


class Checkpoint:
    """One turn's checkpoint: `create()` before the first edit, `note()` before each file write."""

    def __init__(self, root: Path, session_id: str, turn: int) -> None:
        self.root = root
        self.session_id = session_id
        self.turn = turn
        self.git = is_git_repo(root)
        self.commit: str | None = None
        self._files: dict[str, str | None] = {}

    def create(self) -> None:
        if self.git:
            tree = _snapshot_tree(self.root)
            parent = _git(self.root, "rev-parse", "--verify", "-q", REF, check=False).strip()
            message = json.dumps({"session": self.session_id, "turn": self.turn, "time": time.time()})
            args = ["commit-tree", tree, "-m", message] + (["-p", parent] if parent else [])
            self.commit = _git(self.root, *args, env=_identity()).strip()
            _git(self.root, "update-ref", REF, self.commit)

    def note(self, rel: str, before: str | None) -> None:
        """Remember a file's content before the turn first writes it, where the git snapshot
        cannot (no git, or an ignored file)."""
        if rel in self._files or (self.git and not _ignored(self.root, rel)):
            return
        self._files[rel] = before
        journal = _journal_path(self.root)
        entries = _read_journal(journal)
        entry = {"session": self.session_id, "turn": self.turn, "commit": self.commit, "files": self._files}
        if entries and (entries[-1]["session"], entries[-1]["turn"]) == (self.session_id, self.turn):
            entries[-1] = entry
        else:
            entries.append(entry)
        journal.parent.mkdir(parents=True, exist_ok=True)
        journal.write_text(json.dumps(entries), encoding="utf-8")


def undo_last(root: Path) -> list[str]:
    """Restore the working tree to the last checkpoint and drop it; returns the restored paths."""
    root = root.resolve()
    if is_git_repo(root):
        return _undo_git(root)
    journal = _journal_path(root)
    entries = _read_journal(journal)
    if not entries:
        raise UndoError(f"Nothing to undo: teachback has no checkpoint for {root}.")
    entry = entries.pop()
    journal.write_text(json.dumps(entries), encoding="utf-8")
    return _restore_journal_entry(root, entry)


def _restore_journal_entry(root: Path, entry: dict) -> list[str]:
    restored = []
    for rel, content in sorted(entry["files"].items()):
        path = root / rel
        if content is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8", newline="")
        restored.append(rel)
    return restored


def _undo_git(root: Path) -> list[str]:
    commit = _git(root, "rev-parse", "--verify", "-q", REF, check=False).strip()
    if not commit:
        raise UndoError(f"Nothing to undo: {root} has no teachback checkpoint ({REF}).")
    current = _snapshot_tree(root)
    changed = _git(root, "diff-tree", "-r", "-z", "--no-renames", "--name-status", commit, current)
    fields = [f for f in changed.split("\0") if f]
    restored = []
    for status, rel in zip(fields[::2], fields[1::2]):
        path = root / rel
        if status == "A":  # created after the checkpoint
            path.unlink(missing_ok=True)
        else:
            data = subprocess.run(
                ["git", "cat-file", "blob", f"{commit}:{rel}"], cwd=root, capture_output=True, check=True
            ).stdout
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        restored.append(rel)
    journal = _journal_path(root)
    entries = _read_journal(journal)
    if entries and entries[-1].get("commit") == commit:  # ignored files this checkpoint's turn touched
        restored += _restore_journal_entry(root, entries.pop())
        journal.write_text(json.dumps(entries), encoding="utf-8")
    parents = _git(root, "rev-list", "--parents", "-n", "1", commit).split()[1:]
    if parents:
        _git(root, "update-ref", REF, parents[0])
    else:
        _git(root, "update-ref", "-d", REF)
    return sorted(restored)


def _ignored(root: Path, rel: str) -> bool:
    return subprocess.run(["git", "check-ignore", "-q", "--", rel], cwd=root, capture_output=True).returncode == 0


def _snapshot_tree(root: Path) -> str:
    """The tree of the working tree as it is now, written through a throwaway index."""
    with tempfile.TemporaryDirectory(prefix="teachback-index-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        _git(root, "add", "-A", "--", ".", env=env)
        return _git(root, "write-tree", env=env).strip()


def _identity() -> dict[str, str]:
    # commit-tree needs an identity; checkpoints must work where the user has none configured.
    return {
        "GIT_AUTHOR_NAME": "teachback", "GIT_AUTHOR_EMAIL": "teachback@localhost",
        "GIT_COMMITTER_NAME": "teachback", "GIT_COMMITTER_EMAIL": "teachback@localhost",
    }


def _git(root: Path, *args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
    result = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    if check and result.returncode != 0:
        raise UndoError(f"git {args[0]} failed in {root}: {result.stderr.strip()}")
    return result.stdout


def _journal_path(root: Path) -> Path:
    digest = hashlib.sha256(str(root).encode()).hexdigest()[:16]
    return teachback_home() / "undo" / f"{digest}.json"


def _read_journal(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UndoError(f"The undo journal {path} is corrupt ({exc}); delete it to start afresh.") from exc
