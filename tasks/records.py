"""The task record: one line of a task file (JSONL that `datasets` loads).

Field names follow SWE-bench / SWE-smith where they exist (`instance_id`, `repo`,
`problem_statement`, `FAIL_TO_PASS`, `PASS_TO_PASS`). A task file's folder is self-contained:

    tasks.jsonl                 one Task per line
    snapshots/<base_hash>.tar   the original repository's files (never inside a workspace)
    gold/<instance_id>.patch    the deleted code, as a patch that puts it back

Paths inside a record (`snapshot`, `gold_patch`) are relative to the task file's folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

STRATEGIES = ("body", "function", "file")
TEST_VISIBILITY = ("visible", "hidden")


class TaskError(Exception):
    """A task cannot be made, sealed or graded; the message says how to fix it."""


@dataclass(frozen=True)
class DeletedRange:
    """Code removed from the original file `path` (1-based inclusive lines, byte offsets into the
    original). `replacement` is the text put in its place; `removes_file` deletes the file."""

    path: str
    start_line: int
    end_line: int
    start_byte: int
    end_byte: int
    replacement: str = ""
    removes_file: bool = False


@dataclass(frozen=True)
class Task:
    instance_id: str
    repo: str
    base_hash: str
    strategy: str
    problem_statement: str
    FAIL_TO_PASS: tuple[str, ...]
    PASS_TO_PASS: tuple[str, ...]
    test_cmd: str
    deleted: tuple[DeletedRange, ...]
    # Time limits, in seconds, for one run of the test command ("test_timeout"). Measured durations
    # are not kept here: the task file must be byte-identical for the same repository and seed.
    timings: dict[str, float]
    snapshot: str
    gold_patch: str
    # The project's top-level import names: none may resolve outside the workspace when tests run.
    packages: tuple[str, ...]
    # Test files and test configuration: grading always runs these from the snapshot.
    test_files: tuple[str, ...]
    tests: str = "visible"
    # Keys of the JSON line this version does not know (kept so a round trip loses nothing).
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        data = asdict(self)
        data.update(data.pop("extra"))
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> Task:
        data = json.loads(line)
        if not isinstance(data, dict):
            raise TaskError(f"a task line must be a JSON object, got {type(data).__name__}")
        known = {f.name for f in fields(cls)} - {"extra"}
        missing = sorted(known - data.keys() - {"tests"})
        if missing:
            raise TaskError(f"task {data.get('instance_id', '?')} lacks the fields {', '.join(missing)}")
        values = {k: v for k, v in data.items() if k in known}
        values["deleted"] = tuple(DeletedRange(**r) for r in values["deleted"])
        for name in ("FAIL_TO_PASS", "PASS_TO_PASS", "packages", "test_files"):
            values[name] = tuple(values[name])
        return cls(**values, extra={k: v for k, v in data.items() if k not in known})

    @property
    def f2p_files(self) -> tuple[str, ...]:
        """The files that hold the FAIL_TO_PASS tests (from their node ids)."""
        return tuple(sorted({test_file(t) for t in self.FAIL_TO_PASS}))


def test_file(node_id: str) -> str:
    """`tests/test_x.py` from the pytest node id `tests/test_x.py::TestA::test_b[1]`."""
    return node_id.split("::", 1)[0]


def load_tasks(path: Path) -> list[Task]:
    """The tasks of a task file; TaskError names a file that is not there, not a file (a folder, a
    pipe: never opened, so never waited on), unreadable, or holds a line that is not a task."""
    path = Path(path)
    if not path.is_file():
        what = "does not exist" if not path.exists() else "is not a file"
        raise TaskError(f"{path} {what}: give a task file made by `teachback tasks synth`")
    tasks: list[Task] = []
    number = 0
    try:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                number += 1  # the line a failure is on, read in the handlers below
                if line.strip():
                    tasks.append(Task.from_json(line))
    except OSError as exc:
        raise TaskError(f"{path} cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise TaskError(
            f"{path}:{number + 1}: not UTF-8 text; give a task file made by `teachback tasks synth`"
        ) from None
    except (ValueError, TypeError, TaskError) as exc:
        raise TaskError(
            f"{path}:{number}: not a task record ({exc}); regenerate the file with `teachback tasks synth`"
        ) from exc
    return tasks


def write_tasks(path: Path, tasks: Iterable[Task]) -> None:
    """Write a task file atomically (a reader never sees half of it)."""
    path = Path(path)
    temporary = path.with_name(path.name + ".partial")
    temporary.write_text("".join(t.to_json() + "\n" for t in tasks), encoding="utf-8")
    temporary.replace(path)
