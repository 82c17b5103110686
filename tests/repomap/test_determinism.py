"""The map is byte-identical across processes, hash seeds, cold and warm caches."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.repomap import RepoMap
from tests.repomap.helpers import copy_sample

SCRIPT = """
import sys
from pathlib import Path
from agent.repomap import RepoMap
repo_map = RepoMap(Path(sys.argv[1]))
sys.stdout.write(repo_map.render(tokens=500, mentioned=["Store", "area"]))
"""


def _render_in_process(root: Path, home: Path, seed: str) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": seed, "TEACHBACK_HOME": str(home)}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(root)],
        env=env,
        capture_output=True,
        timeout=60,
        cwd=Path(__file__).parents[2],
        check=True,
    )
    return result.stdout


@pytest.mark.timeout(120)
def test_two_hash_seeds_give_identical_maps(tmp_path: Path) -> None:
    root = copy_sample("all", tmp_path / "repo")
    first = _render_in_process(root, tmp_path / "home1", "1")
    second = _render_in_process(root, tmp_path / "home2", "2")
    warm = _render_in_process(root, tmp_path / "home2", "3")
    assert first.count(b"\n") > 20
    assert first == second == warm


def test_repeated_renders_are_identical(tmp_path: Path) -> None:
    root = copy_sample("all", tmp_path / "repo")
    repo_map = RepoMap(root)
    first = repo_map.render(tokens=300)
    assert first
    assert repo_map.render(tokens=300) == first
    assert RepoMap(root).render(tokens=300) == first


def test_parallel_parse_gives_the_same_map(tmp_path: Path) -> None:
    root = copy_sample("all", tmp_path / "repo")
    serial = RepoMap(root, cache_path=tmp_path / "serial.db", workers=1)
    parallel = RepoMap(root, cache_path=tmp_path / "parallel.db", workers=2)
    assert parallel.render(tokens=800) == serial.render(tokens=800)
    assert parallel.parsed_files == serial.parsed_files == 22
