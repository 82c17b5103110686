"""The original repository as a snapshot: which files it holds, a byte-for-byte reproducible tar of
them, and the way back to a tree.

A snapshot holds the project's own files only: no version-control data, caches, bytecode, build
outputs or virtual environments (each could hand an agent the code a task deleted).
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tarfile
from pathlib import Path

from agent.repomap.files import git_files
from tasks.records import TaskError

# Folder names that are never part of a task tree, at any depth.
EXCLUDED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
        ".hypothesis",
        ".eggs",
        "htmlcov",
        ".pytype",
        ".pyre",
        ".dmypy",
        ".ipynb_checkpoints",
        ".benchmarks",
        "node_modules",
        ".venv",
        "venv",
    }
)
# Only at the top of the tree: `build` and `dist` are also ordinary subpackage names.
EXCLUDED_TOP_DIRS = frozenset({"build", "dist"})
EXCLUDED_DIR_SUFFIXES = (".egg-info", ".dist-info")
EXCLUDED_FILES = frozenset({".git", ".coverage", "coverage.xml", ".dmypy.json", "nosetests.xml"})
EXCLUDED_FILE_SUFFIXES = (".pyc", ".pyo", ".egg-info")
EXCLUDED_FILE_PREFIXES = (".coverage.",)

TEST_DIRS = frozenset({"tests", "test", "testing"})
# Test configuration: grading takes these from the snapshot too, so editing them gains nothing.
TEST_CONFIG = frozenset({"pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini", "conftest.py"})
# Top-level modules that are project tooling, not the project's code.
TOOLING_MODULES = frozenset({"setup", "conftest", "noxfile", "tasks", "fabfile", "manage", "dodo"})
SNAPSHOT_DIR = "snapshots"


def is_build_output(path: str) -> bool:
    """Whether a tree-relative posix path is a cache, bytecode, build output or VCS data."""
    parts = path.split("/")
    name = parts[-1]
    for index, part in enumerate(parts[:-1]):
        if part in EXCLUDED_DIRS or part.endswith(EXCLUDED_DIR_SUFFIXES):
            return True
        if index == 0 and part in EXCLUDED_TOP_DIRS:
            return True
    return name in EXCLUDED_FILES or name.endswith(EXCLUDED_FILE_SUFFIXES) or name.startswith(EXCLUDED_FILE_PREFIXES)


def is_test_path(path: str) -> bool:
    """Whether a tree-relative posix path is a test file (or test configuration)."""
    parts = path.split("/")
    name = parts[-1]
    if any(part in TEST_DIRS for part in parts[:-1]):
        return True
    if name == "conftest.py" or (len(parts) == 1 and name in TEST_CONFIG):
        return True
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def list_files(root: Path) -> list[str]:
    """The project's files under `root`, sorted: what git tracks or would track (or every file,
    outside git), minus build outputs, virtual environments and links that leave `root`."""
    # None outside git, [] when git lists nothing (a folder git ignores): both walk the tree instead.
    listed = git_files(root, timeout=120) or _walk_files(root)
    venvs = tuple(p[: -len("pyvenv.cfg")] for p in listed if p.endswith("pyvenv.cfg"))
    base = root.resolve()
    kept = []
    for path in listed:
        if is_build_output(path) or (venvs and path.startswith(venvs)):
            continue
        full = root / path
        if full.is_symlink():
            if not full.resolve().is_relative_to(base):
                continue
        elif not full.is_file():
            continue
        kept.append(path)
    return sorted(kept)


def _walk_files(root: Path) -> list[str]:
    found: list[str] = []
    for directory, dirs, files in os.walk(root):
        rel = Path(directory).relative_to(root).as_posix()
        prefix = "" if rel == "." else rel + "/"
        if "pyvenv.cfg" in files:
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if not is_build_output(f"{prefix}{d}/x"))
        found += [prefix + name for name in files]
    return found


def project_packages(files: list[str]) -> tuple[str, ...]:
    """The project's top-level import names: packages (folders with `__init__.py`) and modules at
    the top or under `src/`, less test folders and tooling scripts."""
    names: set[str] = set()
    present = set(files)
    for path in files:
        parts = path.split("/")
        if parts[0] == "src" and len(parts) > 1:
            parts = parts[1:]
        if len(parts) == 1 and parts[0].endswith(".py"):
            name = parts[0][:-3]
        elif len(parts) == 2 and parts[1] == "__init__.py":
            name = parts[0]
        else:
            continue
        if (
            name.isidentifier()
            and name not in TOOLING_MODULES
            and name not in TEST_DIRS
            and not is_test_path(path)
            and path in present
        ):
            names.add(name)
    return tuple(sorted(names))


def write_snapshot(root: Path, files: list[str], out: Path) -> tuple[str, str]:
    """Write `files` of `root` as `out/snapshots/<base_hash>.tar`; (base_hash, path relative to
    `out`). The tar is reproducible: sorted names, zero times and owners, modes 644/755."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in files:
            tar.addfile(*_member(root / path, path))
    data = buffer.getvalue()
    base_hash = hashlib.sha256(data).hexdigest()[:20]
    relative = f"{SNAPSHOT_DIR}/{base_hash}.tar"
    target = out / relative
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        partial.write_bytes(data)
        partial.replace(target)
    return base_hash, relative


def _member(full: Path, path: str) -> tuple[tarfile.TarInfo, io.BytesIO | None]:
    info = tarfile.TarInfo(path)
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if full.is_symlink():
        info.type = tarfile.SYMTYPE
        info.linkname = os.readlink(full)
        info.mode = 0o777
        return info, None
    content = full.read_bytes()
    info.size = len(content)
    info.mode = 0o755 if os.access(full, os.X_OK) else 0o644
    return info, io.BytesIO(content)


def extract_snapshot(task_dir: Path, snapshot: str, base_hash: str, dest: Path) -> None:
    """Unpack a snapshot into `dest` after checking it is the one the task was made from."""
    path = task_dir / snapshot
    if not path.is_file():
        raise TaskError(
            f"the snapshot {path} is missing: a task file's folder must be copied whole "
            f"(with its {SNAPSHOT_DIR}/ folder)"
        )
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest()[:20] != base_hash:
        raise TaskError(
            f"the snapshot {path} does not match base_hash {base_hash}: it was changed "
            "after the task was made; regenerate the task file"
        )
    dest.mkdir(parents=True, exist_ok=True)
    # The "data" filter (Python 3.11.4+) refuses links and paths that leave `dest`; the hash check
    # above already rules out a tar that teachback did not write.
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, **safe)


def strip_build_outputs(root: Path) -> list[str]:
    """Remove caches, bytecode, build outputs and VCS data from a tree; what was removed."""
    removed: list[str] = []
    for directory, dirs, files in os.walk(root):
        rel = Path(directory).relative_to(root).as_posix()
        prefix = "" if rel == "." else rel + "/"
        for name in list(dirs):
            if is_build_output(f"{prefix}{name}/x") or (Path(directory, name, "pyvenv.cfg").exists()):
                dirs.remove(name)
                full = Path(directory, name)
                if full.is_symlink():
                    full.unlink()
                else:
                    shutil.rmtree(full)
                removed.append(f"{prefix}{name}/")
        for name in files:
            if is_build_output(prefix + name):
                Path(directory, name).unlink()
                removed.append(prefix + name)
    return sorted(removed)
