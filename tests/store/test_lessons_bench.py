"""The lessons bench's scripted part, whole: the mechanism check must see the lessons as shipped
(whatever their wording), and --json's last line is one object."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_scripted_replays_find_the_lesson_at_each_repeat_and_print_one_json_object(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "bench/lessons_bench.py", "--parts", "replay", "--seeds", "0", "--sessions", "8",
         "--json", "--out", str(tmp_path / "out.json")],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    replay = doc["replay"]
    assert replay["totals"]["without"]["repeated"] > 0  # the scripted agent repeats without lessons
    assert replay["hit_rate"] >= 0.9  # a lesson of the situation was in context at (nearly) every repeat
    assert replay["repeated_reduction"]["reduction"] > 0.3
    assert json.loads((tmp_path / "out.json").read_text())["replay"] == replay


def load_bench():
    import importlib.util

    spec = importlib.util.spec_from_file_location("lessons_bench", ROOT / "bench" / "lessons_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(arm: str, repeats_per_task: list[int], samples: int = 4, seed: int = 0) -> list[dict]:
    out = []
    for task, repeats in enumerate(repeats_per_task):
        for k in range(samples):
            row = {"seed": seed, "task": f"t{task}", "state": f"s{task}:1", "arm": arm, "k": k}
            row |= {"repeat": k < repeats, "call_error": k < repeats, "enforced": False, "prompt_tokens": 100}
            row |= {"lessons": 1 if arm != "none" else 0, "copy_fix": False}
            out.append(row)
    return out


def test_the_states_verdict_follows_the_rule_fixed_before_the_run(tmp_path: Path) -> None:
    bench = load_bench()
    base = rows("none", [2, 3, 2, 4, 1, 2])
    gone = bench.summarize_states(base + rows("fix", [0, 0, 0, 1, 0, 0]), ["none", "fix"], 0)["wordings"]["fix"]
    assert gone["repeats"]["verdict"] == "shown" and gone["repeats"]["interval"][1] < 0
    same = bench.summarize_states(base + rows("fix", [2, 3, 2, 4, 1, 2]), ["none", "fix"], 0)["wordings"]["fix"]
    assert same["repeats"]["relative_change"] == 0 and same["repeats"]["verdict"] != "shown"
    assert same["prompt_tokens_added"] == 0 and same["states_with_lessons"] == 6
    # Two runs of other seeds merge into the summary of one run of both.
    for seed in (0, 1):
        doc = {
            "states": {
                "wordings": {"fix": {}},
                "rows": rows("none", [1] * 6, seed=seed) + rows("fix", [0] * 6, seed=seed),
            }
        }
        (tmp_path / f"{seed}.json").write_text(json.dumps(doc))
    merged = bench.merge_states([tmp_path / "0.json", tmp_path / "1.json"])
    assert merged["tasks"] == 12 and merged["samples"] == 48
    with pytest.raises(SystemExit, match="distinct seeds"):
        bench.merge_states([tmp_path / "0.json", tmp_path / "0.json"])


def test_a_merged_summary_keeps_the_other_parts_of_the_runs_it_merges(tmp_path: Path) -> None:
    bench = load_bench()
    first = {"states": {"wordings": {"fix": {}}, "rows": rows("none", [1] * 6, seed=0)}, "replay": {"sessions": 8}}
    second = {"states": {"wordings": {"fix": {}}, "rows": rows("none", [1] * 6, seed=1)}, "latency": {"pairs": 10}}
    (tmp_path / "a.json").write_text(json.dumps(first))
    (tmp_path / "b.json").write_text(json.dumps(second))
    parts = bench.other_parts([tmp_path / "a.json", tmp_path / "b.json"])
    assert parts["replay"] == {"sessions": 8, "from": str(tmp_path / "a.json")}
    assert parts["latency"] == {"pairs": 10, "from": str(tmp_path / "b.json")}
    assert "embedded" not in parts
