"""bench/learn_round.py's split: by task, seeded, stratified by the file each task deletes from."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]


def load_bench():
    spec = importlib.util.spec_from_file_location("learn_round", ROOT / "bench" / "learn_round.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tasks(per_file: dict[str, int]) -> list[SimpleNamespace]:
    return [
        SimpleNamespace(instance_id=f"{name}.f{i}", deleted=(SimpleNamespace(path=name),))
        for name, count in per_file.items()
        for i in range(count)
    ]


def test_the_split_is_by_task_stratified_by_file_and_seeded() -> None:
    bench = load_bench()
    found = tasks({"a.py": 13, "b.py": 7, "c.py": 6, "d.py": 2, "e.py": 1, "f.py": 1, "g.py": 1, "h.py": 1})
    train, held = bench.split_by_task(found, 0.5, seed=0)
    assert {t.instance_id for t in train}.isdisjoint({t.instance_id for t in held})
    assert len(train) + len(held) == len(found) and abs(len(held) - len(found) / 2) <= 2
    trained, kept = Counter(t.deleted[0].path for t in train), Counter(t.deleted[0].path for t in held)
    for name in ("a.py", "b.py", "c.py", "d.py"):  # every file with two or more tasks is on both sides
        assert trained[name] and kept[name]
    assert abs(trained["a.py"] - kept["a.py"]) <= 2  # and split about evenly
    again = bench.split_by_task(found, 0.5, seed=0)
    assert [t.instance_id for t in again[1]] == [t.instance_id for t in held]  # the same seed, the same split
    other = bench.split_by_task(found, 0.5, seed=1)
    assert {t.instance_id for t in other[1]} != {t.instance_id for t in held}


def test_a_resumed_round_reports_the_time_every_process_spent(tmp_path: Path) -> None:
    """Stage times and the total are kept in the work folder as each stage ends: a process resumed
    in the same folder skips the finished stages in no time, and still reports what they cost."""
    import time

    bench = load_bench()
    ledger = tmp_path / "stages.json"
    first = bench.Stages(ledger)
    first.run("branches", time.sleep, 0.2)
    second = bench.Stages(ledger)  # a resumed process: "branches" is done
    assert second.processes == 2 and second.wall["branches"] >= 0.2 and second.earlier_s >= 0.2
    second.run("branches", lambda: None)
    second.run("replay", time.sleep, 0.1)
    third = bench.Stages(ledger)
    assert third.processes == 3 and 0.2 <= third.wall["branches"] < 1.0 and third.wall["replay"] >= 0.1
    assert third.total_s() >= 0.3 and set(third.cpu) == {"branches", "replay"}
