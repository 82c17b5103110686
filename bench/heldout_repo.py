"""Held-out tasks in one real repository, in one command: the pinned boltons sdist from the package
index (sha256 checked), unpacked into a git repository, and `teachback tasks synth --n 64` on it.

    .venv/bin/python bench/heldout_repo.py [FOLDER] [--n 64] [--seed 0] [--workers N]

FOLDER (default .bench/heldout) keeps the download, the repository and the task file; a second run
reuses the task file (and an interrupted one resumes). Prints the funnel from candidates to kept
tasks, the kept tasks per source file, and the task file's path on the last line.
"""

from __future__ import annotations

import argparse
import collections
import logging
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from common.progress import progress_bar  # noqa: E402
from tasks.heldout_repo import BOLTONS, DEFAULT_N, heldout_tasks  # noqa: E402
from tasks.records import TaskError, load_tasks  # noqa: E402


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=REPO / ".bench" / "heldout")
    parser.add_argument("--n", type=int, default=DEFAULT_N, help=f"tasks to keep at most (default {DEFAULT_N})")
    parser.add_argument("--seed", type=int, default=0, help="the order deletions are tried in (default 0)")
    parser.add_argument("--workers", type=int, help="test runs at once (default: one per core)")
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
    print(task_file)
    return 0 if tasks else 1


if __name__ == "__main__":
    raise SystemExit(main())
