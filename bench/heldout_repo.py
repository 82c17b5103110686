"""Held-out tasks in one real repository, in one command: the pinned boltons sdist from the package
index (sha256 checked), unpacked into a git repository, and `teachback tasks synth --n 64` on it.

    .venv/bin/python bench/heldout_repo.py [FOLDER] [--n 64] [--seed 0] [--workers N] [--verify]

FOLDER (default .bench/heldout) keeps the download, the repository and the task file; a second run
reuses the task file (and an interrupted one resumes). Prints the funnel from candidates to kept
tasks, the kept tasks per source file, and the task file's path on the last line. `--verify` then
checks every task as an attempt would meet it: in its sealed workspace no FAIL_TO_PASS test passes
and every PASS_TO_PASS test does, and its gold patch earns the reward (exit 1 when one does not).
"""

from __future__ import annotations

import argparse
import collections
import logging
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from common.progress import progress_bar  # noqa: E402
from tasks.heldout_repo import BOLTONS, DEFAULT_N, check_task, heldout_tasks  # noqa: E402
from tasks.records import Task, TaskError, load_tasks  # noqa: E402


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=REPO / ".bench" / "heldout")
    parser.add_argument("--n", type=int, default=DEFAULT_N, help=f"tasks to keep at most (default {DEFAULT_N})")
    parser.add_argument("--seed", type=int, default=0, help="the order deletions are tried in (default 0)")
    parser.add_argument("--workers", type=int, help="test runs at once (default: one per core)")
    parser.add_argument("--verify", action="store_true", help="grade each task sealed and with its gold patch")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    started = time.perf_counter()
    try:
        with progress_bar(f"{BOLTONS.label}: validating deletions") as progress:
            task_file = heldout_tasks(
                args.folder, n=args.n, seed=args.seed, workers=args.workers, say=say, progress=progress
            )
    except TaskError as exc:
        say(f"heldout_repo: {exc}")
        return 2
    tasks = load_tasks(task_file)
    by_file = collections.Counter(path for task in tasks for path in sorted({d.path for d in task.deleted}))
    say(f"{len(tasks)} tasks from {len(by_file)} files in {time.perf_counter() - started:.0f} s:")
    for path, count in by_file.most_common():
        say(f"  {count:>3}  {path}")
    wrong = verify(tasks, task_file) if args.verify else 0
    print(task_file)
    return 0 if tasks and not wrong else 1


def verify(tasks: list[Task], task_file: Path) -> int:
    """How many tasks fail `check_task`; each is named as it is found."""
    started, wrong = time.perf_counter(), 0
    with progress_bar("verifying tasks") as progress:
        for done, task in enumerate(tasks):
            progress(done, len(tasks))
            with tempfile.TemporaryDirectory(prefix="teachback-verify-") as scratch:
                problem = check_task(task, task_file, Path(scratch))
            if problem:
                wrong += 1
                say(f"{task.instance_id}: {problem}")
        progress(len(tasks), len(tasks))
    say(f"verified {len(tasks) - wrong} of {len(tasks)} tasks in {time.perf_counter() - started:.0f} s")
    return wrong


if __name__ == "__main__":
    raise SystemExit(main())
