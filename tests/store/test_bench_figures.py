"""The data-path benches end with one JSON object holding the figures their README rows quote, each a
positive number (a ratio measured beside its baseline in the same run). Small sizes: this checks what
they print, not how fast anything is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHES = {
    "redact_bench.py": (["--mb", "0.05", "--repeat", "1"], ("mb_per_s", "plain_mb_per_s", "time_vs_plain", "recall")),
    "recorder_bench.py": (["--sessions", "2", "--repeat", "1"], ("live_vs_raw_one_row", "batched_vs_raw_executemany")),
    "export_bench.py": (["--pairs", "200", "--repeat", "1"], ("vs_raw", "vs_raw_redacted")),
}

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("script", sorted(BENCHES))
def test_a_bench_ends_with_its_figures_as_one_json_object(script: str, tmp_path: Path) -> None:
    arguments, fields = BENCHES[script]
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *arguments, "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    for field in fields:
        assert isinstance(figures[field], (int, float)) and figures[field] > 0, (field, figures)
    if "recall" in fields:
        assert figures["recall"] == 1.0
