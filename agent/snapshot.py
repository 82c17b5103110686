"""A git tree of the working tree as it is now, written through a throwaway index.

The index starts from HEAD (so tracked files that .gitignore matches stay in), then takes every
change under the workspace. Nested repositories — a fresh `git init` in a subfolder, a cloned
repository, a submodule — are not added as gitlinks (git refuses one without a commit, and a
gitlink holds no file contents): their files are hashed into the outer repository's object store
and go into the tree as plain files, so a checkpoint holds them and undo restores them.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


class UndoError(Exception):
    pass


@dataclass(frozen=True)
class GitRepo:
    top: Path  # the repository's top folder
    prefix: str  # the workspace's path below it, "" or ending in "/"

    @classmethod
    def find(cls, root: Path) -> GitRepo | None:
        """The repository `root` is in, or None (not a repository, or no git installed)."""
        try:
            result = subprocess.run(
                ["git", "rev-parse", "--show-toplevel", "--show-prefix"], cwd=root, capture_output=True, text=True
            )
        except OSError:
            return None
        lines = result.stdout.splitlines()
        if result.returncode != 0 or not lines:
            return None
        return cls(Path(lines[0]), lines[1] if len(lines) > 1 else "")


def snapshot_tree(repo: GitRepo) -> tuple[str, list[str]]:
    """The tree id of the working tree now, and the nested repositories (workspace-relative)
    whose files went in by content."""
    with tempfile.TemporaryDirectory(prefix="teachback-index-") as tmp:
        env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
        if git(repo.top, "rev-parse", "--verify", "-q", "HEAD^{tree}", check=False).strip():
            git(repo.top, "read-tree", "HEAD", env=env)
        nested = _nested_repositories(repo.top, repo.prefix, env)
        if nested:  # submodules come from HEAD as gitlinks: their files replace them below
            git(repo.top, "update-index", "--force-remove", "--", *nested, env=env)
        excluded = [f":(exclude,literal){path}" for path in nested]
        git(repo.top, "add", "-A", "--", repo.prefix or ".", *excluded, env=env)
        entries = b"".join(_content_entries(repo.top, path) for path in nested)
        if entries:
            git_bytes(repo.top, "update-index", "--add", "-z", "--index-info", env=env, stdin=entries)
        tree = git(repo.top, "write-tree", env=env).strip()
    return tree, [path[len(repo.prefix) :] for path in nested]


def is_ignored(root: Path, rel: str, nested: list[str]) -> bool:
    """Whether the repository that holds `rel` (the innermost of `nested`, else the workspace's)
    ignores it, so that a snapshot leaves it out."""
    owner = max((n for n in nested if rel.startswith(n + "/")), key=len, default="")
    inner = rel[len(owner) + 1 :] if owner else rel
    result = subprocess.run(["git", "check-ignore", "-q", "--", inner], cwd=root / owner, capture_output=True)
    return result.returncode == 0


def _nested_repositories(top: Path, prefix: str, env: dict[str, str]) -> list[str]:
    """Top-relative folders under `prefix` that are repositories of their own: untracked ones
    (listed with a trailing slash) and gitlinks (mode 160000) that are checked out."""
    scope = prefix or "."
    untracked = _split(git_bytes(top, "ls-files", "-z", "-o", "--exclude-standard", "--", scope, env=env))
    found = [p.rstrip("/") for p in untracked if p.endswith("/")]
    for line in _split(git_bytes(top, "ls-files", "-z", "-s", "--", scope, env=env)):
        info, _, path = line.partition("\t")
        if info.startswith("160000 "):
            found.append(path)
    return sorted(p for p in set(found) if os.path.lexists(top / p / ".git"))


def _content_entries(top: Path, nested: str) -> bytes:
    """`update-index --index-info -z` records for every file the repository at `nested` holds
    (tracked or untracked, not ignored by it), inner repositories included."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "-c", "-o", "--exclude-standard"], cwd=top / nested, capture_output=True
    )
    if listed.returncode != 0:
        raise UndoError(
            f"git ls-files failed in the nested repository {nested}: {listed.stderr.decode('utf-8', 'replace').strip()}"
        )
    files: dict[str, str] = {}  # top-relative path -> git mode
    records = b""
    for name in dict.fromkeys(_split(listed.stdout)):
        path = f"{nested}/{name.rstrip('/')}"
        try:
            info = os.lstat(top / path)
        except FileNotFoundError:
            continue  # tracked there, deleted here
        if stat.S_ISLNK(info.st_mode):
            target = os.fsencode(os.readlink(top / path))
            records += _record("120000", git_bytes(top, "hash-object", "-w", "--stdin", stdin=target), path)
        elif stat.S_ISDIR(info.st_mode) and os.path.lexists(top / path / ".git"):
            records += _content_entries(top, path)
        elif stat.S_ISREG(info.st_mode):
            files[path] = "100755" if info.st_mode & stat.S_IXUSR else "100644"
    for path, digest in _hash_files(top, list(files)).items():
        records += _record(files[path], digest.encode(), path)
    return records


def _hash_files(top: Path, paths: list[str]) -> dict[str, str]:
    """Blob ids of files, written to the object store as they are (no filters)."""
    plain = [p for p in paths if "\n" not in p]
    digests: dict[str, str] = {}
    if plain:
        stdin = b"".join(os.fsencode(p) + b"\n" for p in plain)
        out = git_bytes(top, "hash-object", "-w", "--no-filters", "--stdin-paths", stdin=stdin).split()
        digests.update(zip(plain, (d.decode() for d in out)))
    for path in paths:
        if "\n" in path:  # --stdin-paths reads lines: hash this one on its own
            digests[path] = git_bytes(top, "hash-object", "-w", "--no-filters", "--", path).strip().decode()
    return digests


def _record(mode: str, digest: bytes, path: str) -> bytes:
    return mode.encode() + b" " + digest.strip() + b"\t" + os.fsencode(path) + b"\0"


def _split(data: bytes) -> list[str]:
    return [p for p in data.decode("utf-8", "surrogateescape").split("\0") if p]


def git(root: Path, *args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
    return git_bytes(root, *args, env=env, check=check).decode("utf-8", "surrogateescape")


def git_bytes(
    root: Path, *args: str, env: dict[str, str] | None = None, check: bool = True, stdin: bytes | None = None
) -> bytes:
    result = subprocess.run(
        ["git", *args], cwd=root, capture_output=True, input=stdin, env={**os.environ, **(env or {})}
    )
    if check and result.returncode != 0:
        raise UndoError(f"git {args[0]} failed in {root}: {result.stderr.decode('utf-8', 'replace').strip()}")
    return result.stdout
