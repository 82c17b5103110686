"""Held-out tasks in one real repository: a pinned source distribution from the package index,
unpacked into a git repository of one commit, and the feature-deletion tasks made from it.

    folder/downloads/<sdist>.tar.gz      fetched once with pip, checked against its pinned sha256
    folder/<name>-<version>/             the unpacked sdist, a git repository with one commit
    folder/tasks-<name>-<version>-n<N>-seed<S>/tasks.jsonl   `synthesize` on it (resumed when cut short)

A folder that already holds the task file is used as it is, so the learning bench pays for the
synthesis once. Nothing but pip reaches the network, and only when the archive is missing.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tasks.grade import grade
from tasks.records import Task, TaskError
from tasks.seal import commit_tree, git_env, make_workspace
from tasks.synth import TASK_FILE, synthesize
from tasks.testrun import PASSED
from tasks.validate import Funnel, Progress

Say = Callable[[str], None]

# Third-party pytest plugins are not loaded: the library needs none, and the ones a development
# environment carries more than double the time of every test run.
TEST_CMD = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest"
DEFAULT_N = 64
PIP_TIMEOUT = 600.0


@dataclass(frozen=True)
class Sdist:
    """A source distribution on the package index that ships its pytest suite."""

    name: str
    version: str
    sha256: str

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}.tar.gz"

    @property
    def label(self) -> str:
        return f"{self.name}-{self.version}"


# boltons: 30 pure-Python modules, no dependencies, 519 tests that pass in about 3 s.
BOLTONS = Sdist("boltons", "26.2.0", "d39cfd15c1a1c3bd4d705c82252fa9edb8e4f5e8cc039f8e39afac7b1b47e92c")


def heldout_tasks(
    folder: Path,
    sdist: Sdist = BOLTONS,
    *,
    n: int = DEFAULT_N,
    seed: int = 0,
    workers: int | None = None,
    say: Say | None = None,
    progress: Progress | None = None,
) -> Path:
    """The task file of `sdist` under `folder`: the one already there, or fetched, unpacked and
    synthesised now."""
    say = say or (lambda _line: None)
    folder = Path(folder)
    out = folder / f"tasks-{sdist.label}-n{n}-seed{seed}"
    task_file = out / TASK_FILE
    if task_file.is_file():
        say(f"reusing {task_file}")
        return task_file
    archive = fetch_sdist(sdist, folder / "downloads", say)
    repo = unpack_repository(archive, sdist, folder / sdist.label, say)
    say(f"synthesising up to {n} tasks from {repo} (seed {seed})")

    def report(funnel: Funnel) -> None:
        say(funnel.render())

    synthesize(
        repo, out, n=n, seed=seed, test_cmd=TEST_CMD, workers=workers, name=sdist.name, progress=progress, report=report
    )
    return task_file


def fetch_sdist(sdist: Sdist, downloads: Path, say: Say) -> Path:
    """The archive of `sdist` in `downloads`, fetched with pip when missing; its sha256 checked."""
    archive = downloads / sdist.filename
    if not archive.is_file():
        downloads.mkdir(parents=True, exist_ok=True)
        say(f"fetching {sdist.name}=={sdist.version} from the package index with pip")
        with tempfile.TemporaryDirectory(prefix="teachback-sdist-", dir=downloads) as scratch:
            _pip_download(sdist, Path(scratch))
            fetched = sorted(Path(scratch).glob("*.tar.gz"))
            if len(fetched) != 1:
                raise TaskError(
                    f"pip fetched {len(fetched)} archives for {sdist.name}=={sdist.version}, not one; "
                    f"put {sdist.filename} in {downloads} yourself"
                )
            fetched[0].replace(archive)
    digest = sha256_of(archive)
    if digest != sdist.sha256:
        raise TaskError(
            f"{archive} has sha256 {digest}, not the pinned {sdist.sha256}: it is not the archive the tasks "
            f"are made from; delete it and run again to fetch it afresh"
        )
    return archive


def _pip_download(sdist: Sdist, dest: Path) -> None:
    argv = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
    argv += [f"{sdist.name}=={sdist.version}", "--dest", str(dest)]
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TaskError(f"cannot run pip to fetch {sdist.name}=={sdist.version}: {exc}") from exc
    if result.returncode != 0:
        raise TaskError(
            f"pip could not fetch {sdist.name}=={sdist.version} (is the package index reachable?); or put "
            f"{sdist.filename} in {dest.parent} yourself. pip said:\n{result.stderr.strip()[-2000:]}"
        )


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def unpack_repository(archive: Path, sdist: Sdist, dest: Path, say: Say) -> Path:
    """`dest`: the archive's single top folder as a git repository of one commit (made once; an
    unpacking cut short leaves nothing at `dest`)."""
    if (dest / ".git").is_dir():
        return dest
    if dest.exists():
        raise TaskError(f"{dest} exists but is not the unpacked {sdist.label}; delete it and run again")
    say(f"unpacking {archive.name} into {dest}")
    with tempfile.TemporaryDirectory(prefix="teachback-unpack-", dir=dest.parent) as scratch:
        try:
            with tarfile.open(archive, "r:gz") as tar:
                _check_members(archive, tar.getmembers())
                tar.extractall(scratch, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise TaskError(f"cannot unpack {archive}: {exc}; delete it and run again") from exc
        tops = list(Path(scratch).iterdir())
        if len(tops) != 1 or not tops[0].is_dir():
            raise TaskError(f"{archive} does not hold one top folder, as an sdist does; it cannot be used")
        commit_tree(tops[0], message=f"{sdist.label} as published on the package index")
        shutil.move(tops[0], dest)
    return dest


def check_task(task: Task, task_file: Path, scratch: Path) -> str:
    """What is wrong with `task`, or "": in its sealed workspace (made under the empty folder
    `scratch`) no FAIL_TO_PASS test passes and every PASS_TO_PASS test does, and its gold patch
    earns the reward."""
    workspace = make_workspace(task, task_file, scratch / "workspace")
    sealed = grade(task, task_file, workspace)
    passing = [t for t in task.FAIL_TO_PASS if sealed.outcomes[t] == PASSED]
    if passing:
        return f"{len(passing)} FAIL_TO_PASS test(s) pass without the deleted code, e.g. {passing[0]}"
    failing = [t for t in task.PASS_TO_PASS if sealed.outcomes[t] != PASSED]
    if failing:
        return f"{len(failing)} PASS_TO_PASS test(s) do not pass in the sealed workspace, e.g. {failing[0]}"
    patch = (Path(task_file).parent / task.gold_patch).resolve()
    applied = subprocess.run(
        ["git", "apply", str(patch)], cwd=workspace, env=git_env(), capture_output=True, text=True, timeout=120
    )
    if applied.returncode != 0:
        return f"the gold patch does not apply: {applied.stderr.strip()[-500:]}"
    gold = grade(task, task_file, workspace)
    if gold.reward != 1.0:
        return f"the gold patch earns {gold.reward:g} (FAIL_TO_PASS {gold.f2p_pass_fraction:.0%}, PASS_TO_PASS {gold.p2p_pass_fraction:.0%})"
    return ""


def _check_members(archive: Path, members: list[tarfile.TarInfo]) -> None:
    """Only plain files and folders inside the archive's folder (the "data" filter says the same
    on the Pythons that have it)."""
    for member in members:
        parts = Path(member.name).parts
        if member.name.startswith(("/", "\\")) or ".." in parts or not (member.isfile() or member.isdir()):
            raise TaskError(f"{archive} holds {member.name!r}, which is not a plain file inside it; it cannot be used")
