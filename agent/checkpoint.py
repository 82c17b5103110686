"""Checkpoints before the agent's first edit of a turn, and `undo` back to the last one.

In a git repository the whole working tree (tracked and untracked, not ignored) is snapshotted into
a commit on a private ref, `refs/teachback/checkpoints`, through a temporary index: the user's
branch, index and stash are never touched. Each checkpoint's parent is the previous checkpoint, so
undo pops one at a time. Nested repositories (see `agent.snapshot`) go in by content, so undo
restores their files too. Outside git — and, in git, for files .gitignore hides from the snapshot —
a journal under $TEACHBACK_HOME keeps the before-contents of every file the turn touched.

A checkpoint never stops a turn: when the snapshot fails, the journal keeps every file the turn's
edits touch instead (not what commands change), and `take_problems` tells the user so.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path

from agent.config import teachback_home
from agent.safe_write import SafeWriteError, symlink_inside, unlink_inside, write_inside
from agent.snapshot import GitRepo, UndoError, git, git_bytes, is_ignored, snapshot_tree

log = logging.getLogger(__name__)
REF = "refs/teachback/checkpoints"

__all__ = ["REF", "Checkpoint", "UndoError", "undo_last"]


class Checkpoint:
    """One turn's checkpoint: `create()` before the first edit, `note()` before each file write.
    Neither raises: what goes wrong is kept for `take_problems()`."""

    def __init__(self, root: Path, session_id: str, turn: int) -> None:
        self.root = root
        self.session_id = session_id
        self.turn = turn
        self.repo = GitRepo.find(root)
        self.commit: str | None = None
        self.nested: list[str] = []  # workspace-relative folders snapshotted by content
        self._after: str | None = None  # the checkpoint this one follows (None: the first)
        self._files: dict[str, str | None] = {}
        self._problems: list[str] = []
        self._reported: set[str] = set()

    def create(self) -> None:
        if self.repo is None:
            return
        try:
            self._after = _ref_head(self.repo)
            tree, self.nested = snapshot_tree(self.repo)
            message = json.dumps({"session": self.session_id, "turn": self.turn, "time": time.time()})
            args = ["commit-tree", tree, "-m", message] + (["-p", self._after] if self._after else [])
            commit = git(self.repo.top, *args, env=_identity()).strip()
            git(self.repo.top, "update-ref", REF, commit)
            self.commit = commit
        except (UndoError, OSError, ValueError) as exc:
            log.warning("checkpoint of %s failed: %s", self.root, exc)
            self._problem(
                f"Could not snapshot the working tree before this turn's first edit ({exc}). The turn goes on; "
                "`teachback undo` will restore the files this turn's edits touch (from the undo journal), but "
                "not changes made by commands."
            )

    def note(self, rel: str, before: str | None) -> None:
        """Remember a file's content before the turn first writes it, where the git snapshot
        cannot (no git, a failed snapshot, or an ignored file)."""
        if rel in self._files:
            return
        try:
            if self.commit is not None and not is_ignored(self.root, rel, self.nested):
                return
            self._files[rel] = before
            self._save_journal()
        except (UndoError, OSError, ValueError) as exc:
            log.warning("undo journal for %s failed: %s", self.root, exc)
            self._problem(f"Could not record {rel} for undo ({exc}); `teachback undo` may not restore it.")

    def take_problems(self) -> list[str]:
        """What went wrong since the last call, each said once per turn."""
        problems, self._problems = self._problems, []
        return problems

    def _problem(self, text: str) -> None:
        if text not in self._reported:
            self._reported.add(text)
            self._problems.append(text)

    def _save_journal(self) -> None:
        journal = _journal_path(self.root)
        entries = _read_journal(journal)
        entry: dict = {"session": self.session_id, "turn": self.turn, "commit": self.commit, "files": self._files}
        if self.repo is not None and self.commit is None:
            entry["after"] = self._after  # a failed snapshot: undo takes this entry before that checkpoint
        if entries and (entries[-1]["session"], entries[-1]["turn"]) == (self.session_id, self.turn):
            entries[-1] = entry
        else:
            entries.append(entry)
        _write_journal(journal, entries)


def undo_last(root: Path) -> list[str]:
    """Restore the working tree to the last checkpoint and drop it; returns the restored paths."""
    root = root.resolve()
    try:
        repo = GitRepo.find(root)
        if repo is not None:
            return _undo_git(root, repo)
        journal = _journal_path(root)
        entries = _read_journal(journal)
        if not entries:
            raise UndoError(f"Nothing to undo: teachback has no checkpoint for {root}.")
        entry = entries.pop()
        _write_journal(journal, entries)
        return _restore_journal_entry(root, entry)
    except SafeWriteError as exc:
        raise UndoError(f"Undo stopped: {exc} Remove that link and run `teachback undo` again.") from None


def _undo_git(root: Path, repo: GitRepo) -> list[str]:
    commit = _ref_head(repo)
    journal = _journal_path(root)
    entries = _read_journal(journal)
    last = entries[-1] if entries else None
    if last is not None and last.get("commit") is None and "after" in last and last["after"] == commit:
        entries.pop()  # a turn whose snapshot failed, after the last checkpoint: its journal is newer
        _write_journal(journal, entries)
        return _restore_journal_entry(root, last)
    if commit is None:
        raise UndoError(f"Nothing to undo: {root} has no teachback checkpoint ({REF}).")
    current, _ = snapshot_tree(repo)
    restored = _restore_tree(root, repo, commit, current)
    if last is not None and last.get("commit") == commit:  # ignored files this checkpoint's turn touched
        restored += _restore_journal_entry(root, entries.pop())
        _write_journal(journal, entries)
    parents = git(repo.top, "rev-list", "--parents", "-n", "1", commit).split()[1:]
    if parents:
        git(repo.top, "update-ref", REF, parents[0])
    else:
        git(repo.top, "update-ref", "-d", REF)
    return sorted(set(restored))


def _restore_tree(root: Path, repo: GitRepo, commit: str, current: str) -> list[str]:
    """Make the files that differ between the trees `current` and `commit` as they were in
    `commit` (modes and links included); the workspace-relative paths restored."""
    raw = git_bytes(repo.top, "diff-tree", "-r", "-z", "--no-renames", commit, current, "--", repo.prefix or ".")
    fields = [f for f in raw.decode("utf-8", "surrogateescape").split("\0") if f]
    restored = []
    for header, top_rel in zip(fields[::2], fields[1::2]):
        old_mode, _new_mode, old_sha, _new_sha, status = header.lstrip(":").split()
        rel = top_rel[len(repo.prefix) :]
        if status == "A":  # created after the checkpoint
            unlink_inside(root, rel)
        elif old_mode == "120000":
            symlink_inside(
                root, rel, git_bytes(repo.top, "cat-file", "blob", old_sha).decode("utf-8", "surrogateescape")
            )
        elif old_mode in ("100644", "100755"):
            data = git_bytes(repo.top, "cat-file", "blob", old_sha)
            write_inside(root, rel, data, mode=0o755 if old_mode == "100755" else 0o644)
        else:
            continue  # a gitlink from a checkpoint made before nested repositories went in by content
        restored.append(rel)
    return restored


def _restore_journal_entry(root: Path, entry: dict) -> list[str]:
    restored = []
    for rel, content in sorted(entry["files"].items()):
        if content is None:
            unlink_inside(root, rel)
        else:
            write_inside(root, rel, content.encode("utf-8"))
        restored.append(rel)
    return restored


def _ref_head(repo: GitRepo) -> str | None:
    return git(repo.top, "rev-parse", "--verify", "-q", REF, check=False).strip() or None


def _identity() -> dict[str, str]:
    # commit-tree needs an identity; checkpoints must work where the user has none configured.
    return {
        "GIT_AUTHOR_NAME": "teachback",
        "GIT_AUTHOR_EMAIL": "teachback@localhost",
        "GIT_COMMITTER_NAME": "teachback",
        "GIT_COMMITTER_EMAIL": "teachback@localhost",
    }


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


def _write_journal(path: Path, entries: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(entries), encoding="utf-8")
