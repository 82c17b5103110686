"""bench/learn_round.py's choice of held-out sessions: a few already span the repositories."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_bench():
    spec = importlib.util.spec_from_file_location("learn_round", ROOT / "bench" / "learn_round.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_held_out_sessions_alternate_repositories_and_cover_every_task_before_repeating_one() -> None:
    bench = load_bench()
    by_task = {f"inflection.0000000{i}.body__f{i}": [f"a{i}", f"b{i}"] for i in range(6)}
    by_task |= {f"toolz.1111111{i}.body__g{i}": [f"c{i}", f"d{i}"] for i in range(3)}
    chosen = bench.spread(by_task, 4, seed=0)
    repositories = [next(t for t, ids in by_task.items() if s in ids).split(".")[0] for s in chosen]
    assert repositories == ["inflection", "toolz", "inflection", "toolz"]
    every = bench.spread(by_task, 9, seed=0)
    assert len({next(t for t, ids in by_task.items() if s in ids) for s in every}) == 9  # one per task
    assert bench.spread(by_task, 9, seed=0) == every and bench.spread(by_task, 9, seed=1) != every
    assert len(bench.spread(by_task, 100, seed=0)) == 18
