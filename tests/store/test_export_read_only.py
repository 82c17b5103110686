"""`teachback export` where it may not write: a read-only folder (a file, a new subfolder, `--hub`,
`--test-fraction`, verl parquet), an existing file it may not replace, a dataset folder whose data
folder is read-only. Each exits non-zero with a message naming the path, prints no traceback, and
leaves nothing behind: no file, no temporary file, no folder, an earlier export untouched.

A folder is made read-only with chmod, or as root (whom chmod does not stop) with the immutable
flag; where neither binds, the test is skipped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from feedback_store import open_store
from feedback_store.importers import claude
from feedback_store.importers.imports import import_logs

LOGS = Path(__file__).parent / "data" / "agent_logs"


class unwritable:
    """A file or folder nobody may change: chmod for a user; the immutable flag for root (or skip)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> Path:
        if os.geteuid() != 0:
            self.path.chmod(0o500 if self.path.is_dir() else 0o400)
        else:
            made = subprocess.run(["chattr", "+i", str(self.path)], capture_output=True, text=True)
            if made.returncode != 0:
                pytest.skip(f"running as root and chattr +i is unavailable here: {made.stderr.strip()}")
        if writable(self.path):
            self.__exit__()
            pytest.skip(f"{self.path} stays writable here, so there is nothing to test")
        return self.path

    def __exit__(self, *exc: object) -> None:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(self.path)], check=True)
        else:
            self.path.chmod(0o700 if self.path.is_dir() else 0o600)


def writable(path: Path) -> bool:
    target = path / ".probe" if path.is_dir() else path
    try:
        with target.open("a"):
            written = True
    except OSError:
        return False
    if path.is_dir():
        target.unlink()
    return written


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("store") / "feedback.db"
    with open_store(path) as store:
        files = claude.find_files(LOGS / "claude-code")
        import_logs(store, claude.AGENT, files, lambda p: claude.read(p, lambda _: None))
    return path


def export(db: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TEACHBACK_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "cli", "export", "--db", str(db), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def everything(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


CASES = {
    "a file": (["--format", "sft", "--out", "{ro}/sft.jsonl"], "{ro}/sft.jsonl"),
    "a new subfolder": (["--format", "sft", "--out", "{ro}/new/deeper/sft.jsonl"], "{ro}/new/deeper/sft.jsonl"),
    "--hub": (["--format", "sft", "--hub", "--out", "{ro}/hub"], "{ro}/hub"),
    "--test-fraction": (["--format", "sft", "--test-fraction", "0.5", "--out", "{ro}/sft.jsonl"], "{ro}/sft.train"),
    "verl parquet": (["--format", "verl", "--out", "{ro}/verl.parquet"], "{ro}/verl.parquet"),
    "atif": (["--format", "atif", "--out", "{ro}/atif.jsonl"], "{ro}/atif.jsonl"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_export_into_a_read_only_folder_fails_and_leaves_nothing(db: Path, tmp_path: Path, case: str) -> None:
    folder = tmp_path / "read-only"
    folder.mkdir()
    args, named = CASES[case]
    with unwritable(folder):
        done = export(db, tmp_path, *[a.format(ro=folder) for a in args])
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert named.format(ro=folder) in done.stderr and "Nothing was written" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert everything(folder) == []


def test_a_split_that_cannot_be_written_takes_back_the_other(db: Path, tmp_path: Path) -> None:
    folder = tmp_path / "out"
    (folder / "sft.test.jsonl").mkdir(parents=True)  # a folder where the test split goes: no one can replace it
    (folder / "sft.test.jsonl" / "kept.txt").write_text("kept\n")
    done = export(db, tmp_path, "--format", "sft", "--test-fraction", "0.5", "--out", str(folder / "sft.jsonl"))
    assert done.returncode == 1 and f"Cannot write {folder / 'sft.test.jsonl'}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert everything(folder) == ["sft.test.jsonl", "sft.test.jsonl/kept.txt"]  # the train split is gone again


def test_a_dataset_folder_that_cannot_be_rewritten_keeps_the_earlier_export(db: Path, tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    first = export(db, tmp_path, "--format", "sft", "--hub", "--out", str(hub))
    assert first.returncode == 0, first.stderr
    before = {name: (hub / name).read_bytes() for name in everything(hub) if (hub / name).is_file()}
    assert "data/train-00000-of-00001.parquet" in before and "README.md" in before
    with unwritable(hub / "data"):
        again = export(db, tmp_path, "--format", "sft", "--hub", "--license", "mit", "--out", str(hub))
    assert again.returncode == 1 and f"Cannot write the dataset folder {hub}" in again.stderr, again.stderr
    assert "Traceback" not in again.stderr
    assert {name: (hub / name).read_bytes() for name in everything(hub) if (hub / name).is_file()} == before
