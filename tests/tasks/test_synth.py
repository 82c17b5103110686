"""`synthesize`: exact FAIL_TO_PASS / PASS_TO_PASS on real test runs, determinism, resuming."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tasks.records import TaskError, load_tasks
from tasks.sample_suite import build_sample_suite, sample_suite_path
from tasks.snapshot import list_files
from tasks.synth import synthesize
from tasks.testrun import TestCommand, run_tests
from tests.tasks.synth_helpers import FAST_CMD, SAMPLE_PROJECT, TEXTKIT, copy_project, venv_with_project_installed

WORDS = ["tests/test_words.py::test_counts_words", "tests/test_words.py::test_empty_text_has_no_words"]
JOINS = ["tests/test_slug.py::test_joins_words_with_hyphens"]


def test_bundled_sample_project_gives_exact_fail_to_pass_and_pass_to_pass(tmp_path: Path) -> None:
    tasks = synthesize(SAMPLE_PROJECT, tmp_path / "out", seed=0, test_cmd=FAST_CMD)
    by_name = {t.instance_id.split("__", 1)[1]: t for t in tasks}
    assert sorted(by_name) == ["textkit.slug.slugify", "textkit.words.word_count"]
    # test_lowercases fails on the original (the sample's deliberate bug): it is in neither list.
    assert list(by_name["textkit.slug.slugify"].FAIL_TO_PASS) == JOINS
    assert list(by_name["textkit.slug.slugify"].PASS_TO_PASS) == WORDS
    assert list(by_name["textkit.words.word_count"].FAIL_TO_PASS) == WORDS
    assert list(by_name["textkit.words.word_count"].PASS_TO_PASS) == JOINS
    slugify = by_name["textkit.slug.slugify"]
    assert (
        slugify.deleted[0].path == "textkit/slug.py" and slugify.deleted[0].replacement == "raise NotImplementedError"
    )
    assert '"""Turn a title into a URL slug' in slugify.problem_statement
    assert "join(title.split())" not in slugify.problem_statement
    gold = (tmp_path / "out" / slugify.gold_patch).read_text()
    assert '+    return "-".join(title.split())' in gold
    assert load_tasks(tmp_path / "out" / "tasks.jsonl") == sorted(tasks, key=lambda t: t.instance_id)


def _shapes(root: Path) -> Path:
    files = {
        "shapes/__init__.py": '"""Shapes."""\n',
        "shapes/geometry.py": """\
            class Rect:
                def __init__(self, w, h):
                    self.w, self.h = w, h

                def area(self):
                    return self.w * self.h


            class Unit:
                def symbol(self):
                    return "m"


            def perimeter(rect):
                return 2 * (rect.w + rect.h)


            def unused(x):
                return x + 1
            """,
        "tests/test_geometry.py": """\
            from shapes.geometry import Rect, Unit, perimeter


            def test_area():
                assert Rect(2, 3).area() == 6


            def test_perimeter():
                assert perimeter(Rect(2, 3)) == 10


            def test_symbol():
                assert Unit().symbol() == "m"
            """,
        "tests/test_misc.py": "def test_truth():\n    assert 1 + 1 == 2\n",
    }
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(textwrap.dedent(text))
    return root


def test_function_strategy_removes_whole_definitions_and_keeps_classes_valid(tmp_path: Path) -> None:
    tasks = synthesize(_shapes(tmp_path / "shapes"), tmp_path / "out", strategy="function", test_cmd=FAST_CMD)
    geometry = [f"tests/test_geometry.py::test_{n}" for n in ("area", "perimeter", "symbol")]
    got = {t.instance_id.split("__", 1)[1]: list(t.FAIL_TO_PASS) for t in tasks}
    # `unused` never ran under the tests: not a candidate. Removing a name the test file imports
    # fails its whole file; the other test file still runs (PASS_TO_PASS).
    assert got == {
        "shapes.geometry.Rect": geometry,
        "shapes.geometry.Rect.__init__": geometry[:2],
        "shapes.geometry.Rect.area": geometry[:1],
        "shapes.geometry.Unit": geometry,
        # The class left empty gets `pass`, so only this test fails.
        "shapes.geometry.Unit.symbol": geometry[2:],
        "shapes.geometry.perimeter": geometry,
    }
    symbol = next(t for t in tasks if t.instance_id.endswith("Unit.symbol"))
    assert list(symbol.PASS_TO_PASS) == [*geometry[:2], "tests/test_misc.py::test_truth"]
    assert symbol.deleted[0].replacement == "    pass\n"
    assert "`Unit.symbol`" in symbol.problem_statement and 'return "m"' not in symbol.problem_statement


def test_same_seed_gives_a_byte_identical_task_file(tmp_path: Path) -> None:
    one = synthesize(TEXTKIT, tmp_path / "a", n=2, seed=1, test_cmd=FAST_CMD, workers=1)
    two = synthesize(TEXTKIT, tmp_path / "b", n=2, seed=1, test_cmd=FAST_CMD, workers=2)
    assert (tmp_path / "a" / "tasks.jsonl").read_bytes() == (tmp_path / "b" / "tasks.jsonl").read_bytes()
    for task in one:
        assert (tmp_path / "a" / task.gold_patch).read_bytes() == (tmp_path / "b" / task.gold_patch).read_bytes()
        assert (tmp_path / "a" / task.snapshot).read_bytes() == (tmp_path / "b" / task.snapshot).read_bytes()
    other = synthesize(TEXTKIT, tmp_path / "c", n=2, seed=2, test_cmd=FAST_CMD)
    assert len(one) == len(two) == len(other) == 2
    assert {t.instance_id for t in other} != {t.instance_id for t in one}


def test_shipped_sample_suite_is_what_synth_makes(tmp_path: Path) -> None:
    rebuilt = build_sample_suite(tmp_path)
    shipped = sample_suite_path()
    assert (tmp_path / shipped.name).read_bytes() == shipped.read_bytes(), (
        "the sample suite is stale: run `python -m tasks.sample_suite`"
    )
    assert len(rebuilt) >= 10
    for task in rebuilt:
        assert (tmp_path / task.gold_patch).read_bytes() == (shipped.parent / task.gold_patch).read_bytes()
        assert (shipped.parent / task.snapshot).is_file()


def test_problem_statements_never_contain_deleted_code() -> None:
    suite = sample_suite_path()
    for task in load_tasks(suite):
        added = [
            line[1:].strip()
            for line in (suite.parent / task.gold_patch).read_text().splitlines()
            if line.startswith("+") and not line.startswith("+++")
        ]
        leaked = [line for line in added if len(line) >= 8 and line in task.problem_statement]
        assert added and not leaked, task.instance_id


def test_an_interrupted_synthesis_resumes_without_rerunning(tmp_path: Path) -> None:
    out = tmp_path / "out"
    seen: list[tuple[int, int]] = []

    def interrupt_after_two(done: int, total: int) -> None:
        seen.append((done, total))
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        synthesize(TEXTKIT, out, strategy="file", test_cmd=FAST_CMD, progress=interrupt_after_two, workers=1)
    log = out / "tasks.worklog.jsonl"
    assert not (out / "tasks.jsonl").exists()
    assert sum('"candidate"' in line for line in log.read_text().splitlines()) == 2
    seen.clear()
    tasks = synthesize(
        TEXTKIT,
        out,
        strategy="file",
        test_cmd=FAST_CMD,
        progress=lambda done, total: seen.append((done, total)),
        workers=1,
    )
    # textkit's five small modules; slug and words are imported by the package, so removing
    # either fails every test (no PASS_TO_PASS): three tasks.
    assert seen[0] == (2, 5) and seen[1] == (3, 5)
    assert [t.instance_id.split("__", 1)[1] for t in tasks] == ["textkit.case", "textkit.stats", "textkit.wrap"]
    assert not log.exists()


def test_an_installed_copy_of_the_project_is_refused(tmp_path: Path) -> None:
    project = copy_project(SAMPLE_PROJECT, tmp_path / "project")
    python = venv_with_project_installed(tmp_path / "venv", project)
    with pytest.raises(TaskError, match=r"`textkit` from .*pip uninstall"):
        synthesize(project, tmp_path / "out", test_cmd=FAST_CMD, python=python)


def test_an_interpreter_without_pytest_is_named(tmp_path: Path) -> None:
    python = venv_with_project_installed(tmp_path / "venv", tmp_path / "nothing")
    with pytest.raises(TaskError, match=r"pytest is not installed for .*venv/bin/python"):
        synthesize(SAMPLE_PROJECT, tmp_path / "out", test_cmd=FAST_CMD, python=python)


def test_junit_outcomes_become_pytest_node_ids(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / "test_ids.py").write_text(
        textwrap.dedent("""\
        import pytest

        class TestGroup:
            def test_one(self):
                pass

        @pytest.mark.parametrize("value", [1, "a-b"])
        def test_param(value):
            assert value != 1

        @pytest.mark.skip(reason="not today")
        def test_skipped():
            pass

        def test_error(missing_fixture):
            pass
        """)
    )
    run = run_tests(tree, TestCommand.parse(FAST_CMD), 60, files=list_files(tree))
    assert run.outcomes == {
        "tests/test_ids.py::TestGroup::test_one": "passed",
        "tests/test_ids.py::test_param[1]": "failed",
        "tests/test_ids.py::test_param[a-b]": "passed",
        "tests/test_ids.py::test_skipped": "skipped",
        "tests/test_ids.py::test_error": "error",
    }


def test_a_test_command_that_is_not_pytest_must_take_the_report_path() -> None:
    with pytest.raises(TaskError, match=r"\{junit_xml\}"):
        TestCommand.parse("make test")
    command = TestCommand.parse("CI=1 tox -e py -- --junitxml={junit_xml}")
    assert command.env == (("CI", "1"),) and not command.is_pytest
    assert command.argv_for("/bin/python", Path("/r.xml"))[-1] == "--junitxml=/r.xml"


def test_a_task_file_loads_with_datasets(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    rows = datasets.load_dataset("json", data_files=str(sample_suite_path()), split="train", cache_dir=str(tmp_path))
    first = load_tasks(sample_suite_path())[0]
    assert rows.num_rows == len(load_tasks(sample_suite_path()))
    assert rows[0]["instance_id"] == first.instance_id
    assert rows[0]["deleted"][0]["path"] == first.deleted[0].path
    assert rows[0]["FAIL_TO_PASS"] == list(first.FAIL_TO_PASS)
