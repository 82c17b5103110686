"""`teachback demo`: the sample project, and the whole demo end to end with the embedded model."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli.demo import check_tests, make_project, run_demo
from tests.conftest import call, git, turn


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


def run_printed(text: str, command: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run the line the demo printed for `command` (`TEACHBACK_DB=... teachback stats`) as a user would,
    with this interpreter's `teachback` first on PATH."""
    line = next(line.strip() for line in text.splitlines() if re.search(rf"teachback {command}\b", line))
    assignment, *argv = shlex.split(line)
    name, _, value = assignment.partition("=")
    assert name == "TEACHBACK_DB", line
    env = {**os.environ, name: value, "PATH": os.pathsep.join((str(Path(sys.executable).parent), os.environ["PATH"]))}
    argv[0] = shutil.which("teachback", path=env["PATH"]) or argv[0]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


def test_demo_prints_the_corrected_pair_its_record_and_the_lines_that_open_its_database(
    tmp_path: Path, script, teachback_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The embedded model's commonest mistake, scripted: it sends its call again, the loop guard
    # answers, and it calls finish as that answer suggests.
    read = call("read_file", {"path": "textkit/slug.py"})
    model = script(turn(read), turn(read), turn(call("finish", {"summary": "read"})))
    monkeypatch.setenv("TEACHBACK_SEED", "7")
    out = io.StringIO()
    assert run_demo(tmp_path / "demo", model=model, out=out) == 0
    text = out.getvalue()
    assert "seed 7;" in text and "at most 6 steps per instruction and 270 s for all 3" in text
    assert "Feedback pairs recorded: 3 (tool 3; 3 with a correction)" in text
    assert "as its training record (sdpo.jsonl, line 1" in text
    assert 'what the model did    read_file {"path": "textkit/slug.py"}' in text
    assert "what the world said   You made exactly this read_file call" in text
    assert 'what fixed it         finish {"summary": "read"}' in text
    printed = text.split("shortened here):\n", 1)[1]
    record = json.loads(printed[printed.index("\n{\n") + 1 : printed.index("\n}\n") + 2])
    assert record["format"].startswith("teachback-sdpo") and record["error_kind"] == "repeated_call"
    assert record["correction"]["tool_calls"][0]["function"]["name"] == "finish"
    assert "teachback lsp " not in text  # it waits silently on a terminal: the editors start it
    assert "Once more" not in text  # a corrected pair: the instructions are not given again

    stats = run_printed(text, "stats", tmp_path)
    assert stats.returncode == 0, stats.stderr
    assert re.search(r"Sessions:\s+3\b", stats.stdout), stats.stdout
    export_line = run_printed(text, "export", tmp_path)
    assert export_line.returncode == 0, export_line.stderr
    assert len((tmp_path / "demo-sdpo.jsonl").read_text().splitlines()) == 3
    assert not (teachback_home / "feedback.db").exists()  # the user's own store is untouched


def test_demo_refuses_settings_it_cannot_use(tmp_path: Path, script) -> None:
    out = io.StringIO()
    assert run_demo(tmp_path / "demo", model=script(turn()), max_time=-1, out=out) == 2
    assert "max_time" in out.getvalue()
    assert not (tmp_path / "demo").exists()


def test_demo_asks_again_in_new_sessions_while_no_mistake_is_corrected(tmp_path: Path, script) -> None:
    wrong = call("read_file", {"path": "textkit/slugs.py"})
    out = io.StringIO()
    assert run_demo(tmp_path / "demo", model=script(*[turn(wrong)] * 4), out=out) == 0
    text = out.getvalue()
    assert text.count("the demo asks again, each time in a new session") == 1
    asked = re.findall(r"^you> Once more: (.*)$", text, re.MULTILINE)
    assert len(asked) == 4 and asked[0].startswith("Call read_file") and asked[3] == asked[0], asked
    from feedback_store import open_store

    with open_store(tmp_path / "demo" / "feedback.db") as store:
        assert len(store.list_sessions()) == 7
        assert store.pairs() and all(pair.correction is None for pair in store.pairs())
    assert "No pair was corrected this run" in text


def test_an_instruction_stopped_by_the_time_limit_says_so(tmp_path: Path, script) -> None:
    slow = {**turn(call("read_file", {"path": "textkit/slug.py"})), "delay": 30}
    out = io.StringIO()
    assert run_demo(tmp_path / "demo", model=script(slow), max_time=3, out=out) == 0
    text = out.getvalue()
    assert text.count("[max_time]") == 3, text
    assert text.count("(stopped: this instruction's share of the demo's 3 s, --max-time, was 1 s;") == 3, text
    assert "turn outcomes   max_time, max_time, max_time" in text


# A fixed place per seed: the workspace path is part of some tool results (and so of the prompts
# and the sampling seeds), so the same path gives the same run on a given machine.
DEMO_ROOT = Path("/tmp/teachback-demo-test-seeds")
SEEDS = range(10)


@pytest.fixture
def demo_root():
    shutil.rmtree(DEMO_ROOT, ignore_errors=True)
    yield DEMO_ROOT
    shutil.rmtree(DEMO_ROOT, ignore_errors=True)


def check_demo(dest: Path, seed: int) -> tuple[str | None, str, int]:
    """Run the demo with `seed` in `dest` and check that what it printed is what it recorded: the
    id of the corrected pair whose record it printed (None: none was corrected), its output, and
    the number of its sessions."""
    from feedback_store import open_store

    out = io.StringIO()
    assert run_demo(dest, seed=seed, out=out) == 0
    text = out.getvalue()
    assert f"seed {seed};" in text and "you> Call read_file with path textkit/slug.py." in text
    with open_store(dest / "feedback.db") as store:
        sessions, pairs = store.list_sessions(), store.pairs()
    assert 3 <= len(sessions) <= 7 and {s.model for s in sessions} == {"local/smollm2"}
    corrected = [p for p in pairs if p.correction is not None]
    assert f"{len(corrected)} with a correction" in text or not pairs, text
    records = [json.loads(line) for line in (dest / "sdpo.jsonl").read_text().splitlines()] if pairs else []
    fixed = [r for r in records if r["correction"]]
    assert len(fixed) <= len(corrected), text
    if not fixed:
        assert "No pair was corrected this run" in text or not pairs, text
        return None, text, len(sessions)
    # The record printed is the export's first corrected one.
    assert f"as its training record (sdpo.jsonl, line {records.index(fixed[0]) + 1}" in text, text
    assert json.dumps(fixed[0]["id"]) in text
    return fixed[0]["id"], text, len(sessions)


@pytest.mark.slow
@pytest.mark.real_model
@pytest.mark.timeout(400)
def test_demo_end_to_end_prints_what_it_recorded_and_the_line_that_shows_it(demo_root: Path) -> None:
    pytest.importorskip("llama_cpp")
    _shown, text, sessions = check_demo(demo_root / "seed-2", 2)
    stats = run_printed(text, "stats", demo_root)
    assert re.search(rf"Sessions:\s+{sessions}\b", stats.stdout), stats.stdout + stats.stderr


@pytest.mark.slow
@pytest.mark.real_model
@pytest.mark.timeout(3600)
@pytest.mark.skipif(
    not os.environ.get("TEACHBACK_TEST_DEMO_SEEDS"),
    reason="ten whole demos (about 13 minutes on 2 cores); set TEACHBACK_TEST_DEMO_SEEDS=1 to run them",
)
def test_demo_shows_a_corrected_pair_and_its_record_in_nine_of_ten_seeds(demo_root: Path) -> None:
    """The ten demos run in this one process, one after another, so they share the loaded model and
    its cache of the prompt they all start with."""
    pytest.importorskip("llama_cpp")
    shown = {seed: check_demo(demo_root / f"seed-{seed}", seed)[0] for seed in SEEDS}
    assert sum(1 for pair in shown.values() if pair) >= 9, f"corrected pair shown per seed: {shown}"
