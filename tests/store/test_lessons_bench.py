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


def test_the_exact_interval_counts_events_where_the_bootstrap_collapses() -> None:
    bench = load_bench()
    # Three repeats without lessons and none with: a plain percentile bootstrap over tasks said -100%
    # [-100%, -100%], "shown", but three events cannot show a halving. The interval is now the hull of a
    # corrected bootstrap and the exact matched-pairs interval (tasks.verdict), and it says so.
    base = rows("none", [1, 1, 1, 0, 0, 0])
    three = bench.summarize_states(base + rows("fix", [0] * 6), ["none", "fix"], 0)["wordings"]["fix"]
    assert three["repeats"]["interval"][0] == -1.0 and three["repeats"]["interval"][1] > 0
    assert three["repeats"]["verdict"] == "inconclusive"
    exact = three["repeats_exact"]
    assert (exact["only_without"], exact["only_with"], exact["both"]) == (3, 0, 0)
    assert exact["interval"][0] == -1.0 and exact["interval"][1] > 0 and exact["verdict"] == "inconclusive"
    # Many events, all gone with lessons: shown by both.
    many = bench.summarize_states(rows("none", [4] * 6) + rows("fix", [0] * 6), ["none", "fix"], 0)["wordings"]["fix"][
        "repeats_exact"
    ]
    assert many["verdict"] == "shown" and many["interval"][1] < -0.5
    # The same events in both arms: refuted at -50% when there are enough of them.
    same = bench.summarize_states(rows("none", [4] * 6) + rows("fix", [4] * 6), ["none", "fix"], 0)["wordings"]["fix"][
        "repeats_exact"
    ]
    assert same["only_without"] == same["only_with"] == 0 and same["verdict"] is None


def test_clopper_pearson_matches_known_values() -> None:
    from tasks.verdict import clopper_pearson

    low, high = clopper_pearson(0, 3)
    assert low == 0.0 and abs(high - 0.7076) < 1e-3  # 1 - 0.025 ** (1/3)
    low, high = clopper_pearson(5, 10)
    assert abs(low - 0.1871) < 1e-3 and abs(high - 0.8129) < 1e-3


def test_the_exact_interval_refutes_a_halving_when_the_events_only_move_around() -> None:
    bench = load_bench()
    none, fix = rows("none", [0] * 20), rows("fix", [0] * 20)
    for i, (b, a) in enumerate(zip(none, fix, strict=True)):  # 40 repeats in each arm, never in both
        b["repeat"], a["repeat"] = i % 2 == 0, i % 2 == 1
    exact = bench.summarize_states(none + fix, ["none", "fix"], 0)["wordings"]["fix"]["repeats_exact"]
    assert exact["only_without"] == exact["only_with"] == 40 and exact["relative_change"] == 0
    assert exact["interval"][0] > -0.5 and exact["verdict"] == "refuted"
