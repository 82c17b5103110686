"""teachback's ATIF v1.7 trajectories, and the fixtures the import tests read, validated by Harbor's
own trajectory model (harbor.models.trajectories.Trajectory, from the `harbor` package in the venv
`make harbor` builds: Harbor needs Python 3.12 or newer)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from feedback_store import open_store
from feedback_store.export.atif import export_atif
from feedback_store.importers import claude, codex
from feedback_store.importers.imports import import_logs
from tests.store.test_import_atif import JOBS

ROOT = Path(__file__).parents[2]
HARBOR_PYTHON = ROOT / ".venv-harbor" / "bin" / "python"
LOGS = Path(__file__).parent / "data" / "agent_logs"
# Reads each file named on the command line (a .jsonl file: one trajectory per line) with Harbor's
# model, which checks the schema, the step ids and that each result names a call of its step.
VALIDATE = """
import json, sys
from pathlib import Path
from harbor.models.trajectories import Trajectory
for name in sys.argv[1:]:
    path = Path(name)
    texts = path.read_text().splitlines() if path.suffix == ".jsonl" else [path.read_text()]
    for text in texts:
        t = Trajectory.model_validate_json(text)
        print(json.dumps([path.name, t.schema_version, t.agent.name, len(t.steps)]))
"""


def harbor_python() -> Path:
    if HARBOR_PYTHON.exists():
        return HARBOR_PYTHON
    if os.environ.get("CI"):
        pytest.fail(f"{HARBOR_PYTHON} is missing: `make harbor` builds it (make test does)")
    pytest.skip("Harbor's venv is not built here: `make harbor` builds it (make test does)")


def validated(paths: list[Path]) -> list[list]:
    done = subprocess.run(
        [str(harbor_python()), "-c", VALIDATE, *map(str, paths)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_harbor_reads_the_fixtures_as_the_trajectories_they_claim_to_be() -> None:
    found = validated(sorted(JOBS.rglob("trajectory.json")))
    assert sorted((v[1], v[2]) for v in found) == [("ATIF-v1.6", "terminus-2"), ("ATIF-v1.7", "claude-code")]


def test_harbor_validates_the_v17_export_in_both_layouts(tmp_path: Path) -> None:
    db = tmp_path / "f.db"
    with open_store(db) as store:
        for module in (claude, codex):  # pairs, refusals, token counts, tool schemas
            files = module.find_files(LOGS / module.AGENT)
            import_logs(store, module.AGENT, files, lambda p, m=module: m.read(p, lambda _: None))
    count, _, lines, _ = export_atif([db], tmp_path / "sessions.jsonl")
    _, _, folder, _ = export_atif([db], tmp_path / "sessions")
    files = sorted(folder.iterdir())
    assert count == 6 and len(files) == 6
    found = validated([lines, *files])
    assert len(found) == 12 and {v[1] for v in found} == {"ATIF-v1.7"}
    exported = [json.loads(line) for line in lines.read_text().splitlines()]
    results = [r for t in exported for s in t["steps"] for r in (s.get("observation") or {}).get("results", [])]
    assert {"ok": False, "error_kind": "not_found"} in [r.get("extra") for r in results]
    assert any(r.get("extra", {}).get("exit_code") == 1 for r in results)
