"""`teachback demo`: the sample project, and the whole demo end to end with the embedded model."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cli.demo import check_tests, make_project, run_demo
from tests.conftest import git


def test_sample_project_is_a_repository_with_one_failing_test(tmp_path: Path) -> None:
    project = make_project(tmp_path / "textkit")
    assert git(project, "status", "--porcelain") == ""
    assert "Sample project" in git(project, "log", "--oneline")
    assert not list(project.rglob("__pycache__"))
    passed, output = check_tests(project)
    assert not passed
    assert "1 failed, 3 passed" in output
    slug = project / "textkit" / "slug.py"
    slug.write_text(slug.read_text().replace("title.split()", "title.lower().split()"))
    passed, output = check_tests(project)
    assert passed, output
    assert "__pycache__" not in git(project, "status", "--porcelain")  # ignored by the demo's .gitignore


def test_demo_refuses_a_directory_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    out = io.StringIO()
    assert run_demo(tmp_path, out=out) == 1
    assert "not empty" in out.getvalue()
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_demo_with_an_unknown_local_model_says_what_to_use(tmp_path: Path) -> None:
    out = io.StringIO()
    assert run_demo(tmp_path / "demo", model="local/no-such-model", out=out) == 1
    assert "local/smollm2" in out.getvalue()
    assert not (tmp_path / "demo").exists()


# A fixed place: the workspace path is part of the system prompt, and so of the sampling seeds, so
# the same path gives the same run on a given machine (a tmp_path would change it every time).
DEMO_DEST = Path("/tmp/teachback-embedded-demo-test")


@pytest.fixture
def demo_dest():
    shutil.rmtree(DEMO_DEST, ignore_errors=True)
    yield DEMO_DEST
    shutil.rmtree(DEMO_DEST, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.real_model
@pytest.mark.timeout(300)
def test_demo_end_to_end_records_pairs_and_a_loadable_export(demo_dest: Path) -> None:
    pytest.importorskip("llama_cpp")
    datasets = pytest.importorskip("datasets")
    from feedback_store import open_store

    dest = demo_dest
    out = io.StringIO()
    assert run_demo(dest, max_steps=3, out=out) == 0
    text = out.getvalue()
    assert "you> Call read_file with path textkit/slug.py." in text
    assert "Solved: " in text and "teachback tui" in text and "teachback lsp" in text

    with open_store(dest / "feedback.db") as store:
        sessions = store.list_sessions()
        pairs = store.pairs()
    assert len(sessions) == 3 and {s.model for s in sessions} == {"local/smollm2"}
    assert pairs, text
    assert f"Feedback pairs recorded: {len(pairs)}" in text

    export_path = dest / "sdpo.jsonl"
    records = [json.loads(line) for line in export_path.read_text().splitlines()]
    assert records and f"Exported {len(records)} sdpo records" in text
    # Every pair is either a record or left out for a reason the demo prints.
    left_out = (
        re.findall(r"(\d+) ([^;\n]+)", text.split("  left out: ", 1)[1].split("\n", 1)[0])
        if len(records) < len(pairs)
        else []
    )
    assert len(records) + sum(int(n) for n, _ in left_out) == len(pairs), text
    loaded = datasets.load_dataset("json", data_files=str(export_path), split="train")
    assert loaded.num_rows == len(records)
    assert {"prompt", "completion", "feedback"} <= set(loaded.column_names)
    assert all(fmt.startswith("teachback-sdpo") for fmt in loaded["format"])

    project = dest / "textkit"
    assert subprocess.run(["git", "rev-parse", "HEAD"], cwd=project, capture_output=True).returncode == 0
