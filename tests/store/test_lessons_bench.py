"""The lessons bench's scripted part, whole: the mechanism check must see the lessons as shipped
(whatever their wording), and --json's last line is one object."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
