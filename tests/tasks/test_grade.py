"""Grading: the original tests decide; editing, deleting or adding tests gains nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tasks.grade import grade
from tasks.records import Task, load_tasks
from tasks.sample_suite import sample_suite_path
from tasks.seal import make_workspace
from tasks.synth import synthesize
from tests.tasks.synth_helpers import FAST_CMD

SUITE = sample_suite_path()
TRUNCATE = "tests/test_wrap.py::test_long_text_ends_in_ellipsis"
SHORT = "tests/test_wrap.py::test_short_text_is_not_truncated"


@pytest.fixture
def task() -> Task:
    """The sample suite's `truncate` task: two FAIL_TO_PASS tests, eleven PASS_TO_PASS."""
    return next(t for t in load_tasks(SUITE) if t.instance_id.endswith("wrap.truncate"))


@pytest.fixture
def workspace(task: Task, tmp_path: Path) -> Path:
    return make_workspace(task, SUITE, tmp_path / "ws")


def _apply_gold(task: Task, workspace: Path) -> None:
    subprocess.run(["git", "apply", str(SUITE.parent / task.gold_patch)], cwd=workspace, check=True)


def _fix_truncate_differently(workspace: Path) -> None:
    path = workspace / "textkit" / "wrap.py"
    path.write_text(
        path.read_text().replace(
            "raise NotImplementedError",
            "if len(text) <= width:\n        return text\n"
            "    return (text[: max(0, width - len(ellipsis))] + ellipsis)[:width]",
        )
    )


def test_the_gold_patch_earns_the_reward(task: Task, workspace: Path) -> None:
    _apply_gold(task, workspace)
    result = grade(task, SUITE, workspace)
    assert (result.reward, result.f2p_pass_fraction, result.p2p_pass_fraction) == (1.0, 1.0, 1.0)
    assert set(result.outcomes) == {*task.FAIL_TO_PASS, *task.PASS_TO_PASS}
    assert set(result.outcomes.values()) == {"passed"}


def test_an_untouched_workspace_fails_only_the_deleted_feature(task: Task, workspace: Path) -> None:
    result = grade(task, SUITE, workspace)
    assert task.FAIL_TO_PASS == (TRUNCATE, SHORT)
    assert (result.reward, result.f2p_pass_fraction, result.p2p_pass_fraction) == (0.0, 0.0, 1.0)
    assert result.outcomes[TRUNCATE] == result.outcomes[SHORT] == "failed"
    assert "NotImplementedError" in result.output


def test_another_correct_implementation_also_passes(task: Task, workspace: Path) -> None:
    _fix_truncate_differently(workspace)
    assert grade(task, SUITE, workspace).reward == 1.0


def test_edited_tests_gain_nothing(task: Task, workspace: Path) -> None:
    (workspace / "tests" / "test_wrap.py").write_text(
        "def test_long_text_ends_in_ellipsis():\n    pass\n\n\ndef test_short_text_is_not_truncated():\n    pass\n"
    )
    result = grade(task, SUITE, workspace)
    assert result.reward == 0.0 and result.outcomes[TRUNCATE] == "failed"


def test_deleted_tests_are_put_back(task: Task, workspace: Path) -> None:
    (workspace / "tests" / "test_wrap.py").unlink()
    (workspace / "pytest.ini").unlink()
    result = grade(task, SUITE, workspace)
    assert result.reward == 0.0 and result.outcomes[TRUNCATE] == "failed"


def test_an_added_conftest_that_forces_passes_is_ignored(task: Task, workspace: Path) -> None:
    forced = (
        "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
    )
    (workspace / "conftest.py").write_text(forced)
    (workspace / "tests" / "conftest.py").write_text(forced)
    result = grade(task, SUITE, workspace)
    assert result.reward == 0.0 and result.outcomes[TRUNCATE] == "failed"


def test_files_that_run_before_the_tests_are_left_out(task: Task, workspace: Path) -> None:
    (workspace / "sitecustomize.py").write_text("raise SystemExit(0)\n")
    (workspace / "pytest.py").write_text("raise SystemExit(0)\n")
    _fix_truncate_differently(workspace)
    result = grade(task, SUITE, workspace)
    assert result.reward == 1.0
    assert "left out sitecustomize.py" in result.output
    assert "left out pytest.py: it shadows the installed module `pytest`" in result.output


def test_a_fix_that_breaks_another_feature_earns_nothing(task: Task, workspace: Path) -> None:
    _apply_gold(task, workspace)
    words = workspace / "textkit" / "words.py"
    words.write_text(words.read_text().replace("len(text.split())", "len(text.split(' '))"))
    result = grade(task, SUITE, workspace)
    assert result.reward == 0.0 and result.f2p_pass_fraction == 1.0
    assert 0.0 < result.p2p_pass_fraction < 1.0
    assert result.outcomes["tests/test_words.py::test_counts_words"] == "failed"


def test_a_run_past_the_time_limit_is_killed(task: Task, workspace: Path) -> None:
    wrap = workspace / "textkit" / "wrap.py"
    wrap.write_text(wrap.read_text().replace("raise NotImplementedError", "while True:\n        pass"))
    result = grade(task, SUITE, workspace, timeout=3)
    assert result.reward == 0.0 and result.seconds < 30
    assert set(result.outcomes.values()) == {"error"}
    assert "time limit of 3 s" in result.output


def test_doctests_in_the_changed_module_never_bring_back_the_original(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "pytest.ini").write_text("[pytest]\naddopts = --doctest-modules\n")
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "mod.py").write_text(
        'def double(x):\n    """Twice x.\n\n    >>> double(2)\n    4\n    """\n    return x * 2\n'
    )
    (project / "tests" / "test_mod.py").write_text(
        "from pkg.mod import double\n\n\ndef test_double():\n    assert double(3) == 6\n"
    )
    (project / "tests" / "test_other.py").write_text("def test_ok():\n    pass\n")
    out = tmp_path / "out"
    (doctested,) = synthesize(project, out, test_cmd=FAST_CMD)
    assert doctested.FAIL_TO_PASS == ("pkg/mod.py::pkg.mod.double", "tests/test_mod.py::test_double")
    hidden = make_workspace(doctested, out / "tasks.jsonl", tmp_path / "ws", tests="hidden")
    assert (hidden / "pkg" / "mod.py").is_file() and not (hidden / "tests" / "test_mod.py").exists()
    untouched = grade(doctested, out / "tasks.jsonl", hidden)
    assert untouched.reward == 0.0 and untouched.f2p_pass_fraction == 0.0
    subprocess.run(["git", "apply", str(out / doctested.gold_patch)], cwd=hidden, check=True)
    assert grade(doctested, out / "tasks.jsonl", hidden).reward == 1.0
