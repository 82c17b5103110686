from __future__ import annotations

from pathlib import Path

import pytest

from agent.repomap import split_focus
from cli.map import LARGE_SCAN, map_main
from tests.repomap.helpers import copy_sample


def test_map_main_prints_the_map(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = copy_sample("python", tmp_path / "repo")
    assert map_main(root, ["todo/cli.py", "load_store"], 200) == 0
    out, err = capsys.readouterr()
    assert out.startswith("todo/")
    assert "def load_store(path: Path) -> TaskStore:" in out
    assert "def main(argv: list[str]) -> int:" in out
    assert err == ""  # a small scan on a non-terminal draws no progress bar


def test_map_main_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert map_main(tmp_path / "missing", [], 100) == 2
    assert "not a folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert map_main(tmp_path / "empty", [], 100) == 1
    assert "no definitions found" in capsys.readouterr().err


def test_split_focus(tmp_path: Path) -> None:
    root = copy_sample("python", tmp_path / "repo")
    paths, names = split_focus(root, ["todo/cli.py", str(root / "todo"), "TaskStore.add", "nowhere.py"])
    assert paths == ["todo/cli.py", "todo"]
    assert names == ["TaskStore", "add", "nowhere", "py"]


def test_large_scan_reports_progress_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "big"
    root.mkdir()
    for i in range(LARGE_SCAN + 10):
        (root / f"m_{i}.py").write_text(f"def f_{i}(x):\n    return g_{i % 7}(x)\n\n\ndef g_{i}(y):\n    return y\n")
    assert map_main(root, [], 100) == 0
    out, err = capsys.readouterr()
    assert "Parsing source files" in err
    assert "100%" in err
    assert "def g_" in out
