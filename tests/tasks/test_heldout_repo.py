"""Held-out tasks in one repository: the synthesis funnel on a multi-module package, and an sdist
unpacked into a git repository and synthesised, offline (the archive is made here)."""

from __future__ import annotations

import hashlib
import io
import tarfile
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from tasks.heldout_repo import Sdist, check_task, heldout_tasks, unpack_repository
from tasks.records import TaskError, load_tasks
from tasks.synth import synthesize
from tasks.validate import Funnel
from tests.tasks.synth_helpers import FAST_CMD, git

PACKAGE = {
    "unitkit/__init__.py": '"""Units."""\nfrom unitkit.registry import register\n\nUNITS = register("m", "km", "cm")\n',
    "unitkit/registry.py": "def register(*names):\n    return frozenset(names)\n",
    "unitkit/lengths.py": """\
        def to_metres(value, unit):
            factors = {"m": 1.0, "km": 1000.0, "cm": 0.01}
            return value * factors[unit]


        def check_unit(unit):
            if unit not in ("m", "km", "cm"):
                raise ValueError(f"unknown unit {unit!r}")
        """,
    "unitkit/money.py": """\
        def cents(amount):
            return round(amount * 100)


        def never_called(x):
            return x - 1
        """,
    "unitkit/text.py": """\
        from unitkit.lengths import to_metres


        def shout(word):
            return word.upper() + "!"


        def label(value, unit):
            if not unit:
                return ""
            return f"{to_metres(value, unit):g} m"
        """,
    "tests/test_lengths.py": """\
        import pytest

        from unitkit.lengths import check_unit, to_metres


        def test_km():
            assert to_metres(2, "km") == 2000.0


        def test_unknown_unit_is_refused():
            with pytest.raises(Exception):
                check_unit("mile")
        """,
    "tests/test_money.py": "from unitkit.money import cents\n\n\ndef test_cents():\n    assert cents(1.5) == 150\n",
    "tests/test_text.py": """\
        from unitkit.text import label, shout


        def test_shout():
            assert shout("hi") == "HI!"


        def test_label():
            assert label(3, "cm") == "0.03 m"
        """,
}


def _package(root: Path) -> Path:
    for path, text in PACKAGE.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(textwrap.dedent(text))
    return root


def test_funnel_keeps_tasks_whose_fail_to_pass_tests_fail_in_the_sealed_workspace(tmp_path: Path) -> None:
    funnels: list[Funnel] = []
    tasks = synthesize(_package(tmp_path / "unitkit"), tmp_path / "out", test_cmd=FAST_CMD, report=funnels.append)
    [funnel] = funnels
    # Exercised: register, to_metres, check_unit, cents, shout, label (not never_called).
    assert (funnel.tests, funnel.candidates, funnel.checked) == (5, 6, 6)
    # check_unit's test takes any exception, the stub's included; register runs on import, so
    # without it no test passes.
    assert (funnel.valid, funnel.no_test_failed, funnel.every_test_failed, funnel.timed_out) == (4, 1, 1, 0)
    assert funnel.kept == len(tasks) == 4
    assert "6 candidates, 6 checked: 4 valid, 1 noticed by no test, 1 failing every test" in funnel.render()
    assert {t.deleted[0].path for t in tasks} == {"unitkit/lengths.py", "unitkit/money.py", "unitkit/text.py"}
    task_file = tmp_path / "out" / "tasks.jsonl"
    # Sealed, no FAIL_TO_PASS test passes and every PASS_TO_PASS test does; the gold patch earns 1.
    for task in load_tasks(task_file):
        assert check_task(task, task_file, tmp_path / "check" / task.instance_id) == "", task.instance_id
    # A task whose FAIL_TO_PASS names a test that passes without the deleted code is caught.
    cents = next(t for t in tasks if t.instance_id.endswith("unitkit.money.cents"))
    wrong = replace(cents, FAIL_TO_PASS=("tests/test_text.py::test_shout",))
    assert check_task(wrong, task_file, tmp_path / "wrong").startswith("1 FAIL_TO_PASS test(s) pass without")
    label = next(t for t in tasks if t.instance_id.endswith("unitkit.text.label"))
    # Deleting to_metres fails test_label too: FAIL_TO_PASS crosses modules.
    metres = next(t for t in tasks if t.instance_id.endswith("unitkit.lengths.to_metres"))
    assert set(metres.FAIL_TO_PASS) == {"tests/test_lengths.py::test_km", "tests/test_text.py::test_label"}
    assert label.FAIL_TO_PASS == ("tests/test_text.py::test_label",)


def _sdist(tmp_path: Path, members: dict[str, bytes]) -> tuple[Path, str]:
    archive = tmp_path / "downloads" / "unitkit-1.0.tar.gz"
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return archive, hashlib.sha256(archive.read_bytes()).hexdigest()


def test_a_pinned_sdist_becomes_a_git_repository_and_its_tasks_are_reused(tmp_path: Path) -> None:
    members = {f"unitkit-1.0/{p}": textwrap.dedent(t).encode() for p, t in PACKAGE.items()}
    _, sha = _sdist(tmp_path, {**members, "unitkit-1.0/PKG-INFO": b"Name: unitkit\n"})
    sdist = Sdist("unitkit", "1.0", sha)
    lines: list[str] = []
    task_file = heldout_tasks(tmp_path, sdist, n=3, say=lines.append)
    assert task_file == tmp_path / "tasks-unitkit-1.0-n3-seed0" / "tasks.jsonl"
    tasks = load_tasks(task_file)
    assert len(tasks) == 3 and all(t.repo == "unitkit" and t.test_cmd.startswith("PYTEST_DISABLE") for t in tasks)
    repo = tmp_path / "unitkit-1.0"
    assert git(repo, "rev-list", "--count", "HEAD").strip() == b"1"
    assert git(repo, "status", "--porcelain") == b""
    assert not any("fetching" in line for line in lines)  # the archive was there: no pip
    assert any("3 kept" in line for line in lines)
    again: list[str] = []
    assert heldout_tasks(tmp_path, sdist, n=3, say=again.append) == task_file
    assert again == [f"reusing {task_file}"]


def test_an_archive_that_is_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    _sdist(tmp_path, {"unitkit-1.0/unitkit/__init__.py": b""})
    with pytest.raises(TaskError, match="not the pinned"):
        heldout_tasks(tmp_path, Sdist("unitkit", "1.0", "0" * 64))
    assert not (tmp_path / "unitkit-1.0").exists()


@pytest.mark.parametrize("name", ["../escape.py", "/etc/evil.py", "unitkit-1.0/../../escape.py"])
def test_an_archive_reaching_outside_its_folder_is_refused(tmp_path: Path, name: str) -> None:
    archive, _ = _sdist(tmp_path, {"unitkit-1.0/unitkit/__init__.py": b"", name: b"x = 1\n"})
    with pytest.raises(TaskError, match="not a plain file inside it"):
        unpack_repository(archive, Sdist("unitkit", "1.0", ""), tmp_path / "repo", lambda _line: None)
    assert not (tmp_path / "repo").exists() and not (tmp_path.parent / "escape.py").exists()


def test_an_archive_without_one_top_folder_is_refused(tmp_path: Path) -> None:
    archive, _ = _sdist(tmp_path, {"a/x.py": b"", "b/y.py": b""})
    with pytest.raises(TaskError, match="one top folder"):
        unpack_repository(archive, Sdist("unitkit", "1.0", ""), tmp_path / "repo", lambda _line: None)
