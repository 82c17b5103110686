"""The sample suite shipped in the package (`tasks/suites/sample.jsonl`), so `teachback bench
--suite sample` runs offline: body-deletion tasks made from `tasks/suites/textkit`, a copy of the
bundled sample project with a few more features and tests.

Rebuild it from a checkout after changing that copy: `python -m tasks.sample_suite`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # finding the suite's path imports nothing heavy
    from tasks.records import Task
    from tasks.validate import Progress

SUITE_DIR = Path(__file__).resolve().parent / "suites"
SOURCE = SUITE_DIR / "textkit"
TASK_FILE = "sample.jsonl"
# Third-party pytest plugins are not loaded: the suite needs none, and teachback's own
# development plugins would only slow every run.
TEST_CMD = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest"
SETTINGS = {"n": None, "seed": 0, "strategy": "body", "tests": "visible", "test_cmd": TEST_CMD}


def sample_suite_path() -> Path:
    """The shipped task file of the sample suite."""
    return SUITE_DIR / TASK_FILE


def build_sample_suite(out: Path = SUITE_DIR, progress: Progress | None = None) -> list[Task]:
    from tasks.synth import synthesize

    return synthesize(SOURCE, out, progress=progress, name="textkit", task_file=TASK_FILE, **SETTINGS)


def main() -> int:
    tasks = build_sample_suite()
    sys.stdout.write(f"{len(tasks)} tasks in {sample_suite_path()}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
