"""Task synthesis throughput: validated task instances per minute on real pure-Python libraries.

    .venv/bin/python bench/synth_bench.py [--n 12] [--workers N] [--strategy body]

Fetches the source distributions of two small libraries whose sdists ship their tests (pytest
only, no other test dependency) from the package index into .bench/synth/ (`pip download
--no-deps --no-binary :all:`), then runs `synthesize` on each from a cold start (no work log):
snapshot, two baseline test runs (one traced), candidates, and one test run per candidate until
--n tasks validate. Prints per library: tests passing on the original, candidates checked,
tasks kept, wall time, validated instances per minute and test runs per minute.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from common.progress import progress_bar  # noqa: E402
from tasks.synth import synthesize  # noqa: E402
from tasks.validate import default_workers  # noqa: E402

BENCH = REPO / ".bench" / "synth"
# (distribution, version, folder of the extracted sdist): small, pure Python, tests in the sdist.
LIBRARIES = [("inflection", "0.5.1"), ("toolz", "1.2.0")]
TEST_CMD = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest"


def fetch(name: str, version: str) -> Path:
    """The extracted sdist of name==version under .bench/synth/src (downloaded once)."""
    downloads = BENCH / "downloads"
    archives = (
        [
            p
            for p in downloads.glob("*.tar.gz")
            if p.name.lower().replace("-", "_").startswith(f"{name}_{version}".replace("-", "_"))
        ]
        if downloads.is_dir()
        else []
    )
    if not archives:
        downloads.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"{name}=={version}",
                "-d",
                str(downloads),
            ],
            check=True,
        )
        return fetch(name, version)
    target = BENCH / "src" / archives[0].name.removesuffix(".tar.gz")
    if not target.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archives[0]) as tar:
            tar.extractall(target.parent, filter="data")
    return target


def run(name: str, source: Path, n: int | None, workers: int, strategy: str) -> dict[str, float]:
    out = BENCH / "tasks" / name
    shutil.rmtree(out, ignore_errors=True)
    checked = [0, 0]  # (candidates validated, candidates found)

    def count(done: int, total: int) -> None:
        checked[:] = [done, total]

    started = time.perf_counter()
    with progress_bar(f"{name}: validating") as bar:

        def both(done: int, total: int) -> None:
            count(done, total)
            bar(done, total)

        tasks = synthesize(
            source, out, n=n, seed=0, strategy=strategy, test_cmd=TEST_CMD, progress=both, workers=workers
        )
    seconds = time.perf_counter() - started
    passing = len(tasks[0].FAIL_TO_PASS) + len(tasks[0].PASS_TO_PASS) if tasks else 0
    return {
        "tests": passing,
        "candidates": checked[1],
        "checked": checked[0],
        "tasks": len(tasks),
        "seconds": seconds,
        "per_minute": len(tasks) / seconds * 60,
        "runs_per_minute": (checked[0] + 2) / seconds * 60,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=12, help="tasks to make per library (default 12)")
    parser.add_argument("--workers", type=int, default=default_workers())
    parser.add_argument("--strategy", default="body", choices=["body", "function", "file"])
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rows = []
    for name, version in LIBRARIES:
        source = fetch(name, version)
        rows.append((f"{name} {version}", run(name, source, args.n, args.workers, args.strategy)))
    print(f"\nsynth throughput ({args.strategy} strategy, {args.workers} workers, {os.cpu_count()} cores, n={args.n})")
    print(
        f"{'library':<18}{'tests':>7}{'candidates':>12}{'checked':>9}{'tasks':>7}{'wall s':>9}"
        f"{'tasks/min':>11}{'runs/min':>10}"
    )
    for label, r in rows:
        print(
            f"{label:<18}{r['tests']:>7}{r['candidates']:>12}{r['checked']:>9}{r['tasks']:>7}"
            f"{r['seconds']:>9.1f}{r['per_minute']:>11.1f}{r['runs_per_minute']:>10.1f}"
        )
    print(
        "tests: passing on the original; candidates: exercised definitions; checked: those whose "
        "mutated tree ran the tests (validation stops once n are kept); runs: checked + 2 baseline runs"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
