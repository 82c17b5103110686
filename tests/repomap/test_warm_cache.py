"""A new process reads back the map (or the graph) stored for unchanged files, and gets exactly the
map a cold build gives; a changed file, focus or budget is a different map."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agent.repomap import RepoMap
from agent.repomap.rank import FileParts, Graph, build_graph, rank_definitions
from agent.repomap.tags import Tagger
from tests.at_once import errors_at_once
from tests.repomap.helpers import copy_sample

REPO = Path(__file__).parents[2]
# Renders in a new process; reports the map, the files parsed, and which heavy modules it loaded.
SCRIPT = """
import json, sys
from pathlib import Path
from agent.repomap import RepoMap
repo_map = RepoMap(Path(sys.argv[1]))
text = repo_map.render(**json.loads(sys.argv[2]))
heavy = ("numpy", "rich", "tree_sitter_python", "tree_sitter_c", "litellm")
print(json.dumps({"text": text, "parsed": repo_map.parsed_files,
                  "loaded": [name for name in heavy if name in sys.modules]}))
"""
pytestmark = pytest.mark.timeout(180)


def _new_process(root: Path, home: Path, **render: object) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(root), json.dumps(render)],
        cwd=REPO,
        capture_output=True,
        env={**os.environ, "TEACHBACK_HOME": str(home)},
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(result.stdout)


def _cold(root: Path, home: Path, **render: object) -> str:
    """The map from an empty cache, in this process."""
    return RepoMap(root, cache_path=home / "cold.db").render(**render)


def test_warm_map_in_a_new_process_is_the_cold_map_read_back(tmp_path: Path, teachback_home: Path) -> None:
    root = copy_sample("all", tmp_path / "repo")
    cold = _new_process(root, teachback_home, tokens=600, mentioned=["Store"])
    assert cold["parsed"] == 22
    assert "numpy" in cold["loaded"]

    warm = _new_process(root, teachback_home, tokens=600, mentioned=["Store"])
    assert warm["text"] == cold["text"]
    assert cold["text"].count("\n") > 20
    assert warm["parsed"] == 0
    assert warm["loaded"] == []  # no ranking, no grammar, no progress bar: the stored map


def test_teachback_map_command_warm_output_is_byte_identical(tmp_path: Path, teachback_home: Path) -> None:
    root = copy_sample("all", tmp_path / "repo")
    command = [sys.executable, "-m", "cli", "map", "--workspace", str(root), "--tokens", "400"]
    env = {**os.environ, "TEACHBACK_HOME": str(teachback_home)}
    cold = subprocess.run(command, cwd=REPO, env=env, capture_output=True, timeout=120, check=True).stdout
    warm = subprocess.run(command, cwd=REPO, env=env, capture_output=True, timeout=120, check=True).stdout
    assert cold.count(b"\n") > 10
    assert warm == cold
    assert cold.decode() == _cold(root, tmp_path, tokens=400)


def test_a_changed_file_is_a_new_map(tmp_path: Path, teachback_home: Path) -> None:
    root = copy_sample("python", tmp_path / "repo")
    first = _new_process(root, teachback_home, tokens=400)
    storage = root / "todo" / "storage.py"
    storage.write_text(storage.read_text() + "\n\ndef export_csv(store: TaskStore) -> str:\n    return ''\n")

    changed = _new_process(root, teachback_home, tokens=400)
    assert "def export_csv(store: TaskStore) -> str:" in changed["text"]
    assert "def export_csv" not in first["text"]
    assert changed["parsed"] == 1
    assert changed["text"] == _cold(root, tmp_path, tokens=400)


def test_a_touched_file_with_the_same_content_finds_the_map_by_content(tmp_path: Path, teachback_home: Path) -> None:
    root = copy_sample("python", tmp_path / "repo")
    first = _new_process(root, teachback_home, tokens=400)
    models = root / "todo" / "models.py"
    stat = models.stat()
    os.utime(models, ns=(stat.st_atime_ns, stat.st_mtime_ns + 7_000_000_000))

    touched = _new_process(root, teachback_home, tokens=400)
    assert touched["text"] == first["text"]
    assert touched["parsed"] == 0
    assert "numpy" not in touched["loaded"]  # found by content hash after the scan, not ranked again


def test_another_focus_or_budget_ranks_again_from_the_stored_graph(tmp_path: Path, teachback_home: Path) -> None:
    root = copy_sample("all", tmp_path / "repo")
    wide = _new_process(root, teachback_home, tokens=600)
    focused = _new_process(root, teachback_home, tokens=600, focus_paths=["go"], mentioned=["area"])
    small = _new_process(root, teachback_home, tokens=150)

    assert focused["text"] != wide["text"]
    assert focused["text"] == _cold(root, tmp_path / "a", tokens=600, focus_paths=["go"], mentioned=["area"])
    assert small["text"] == _cold(root, tmp_path / "b", tokens=150)
    assert len(small["text"]) < len(wide["text"])
    for result in (focused, small):
        assert result["parsed"] == 0
        assert "numpy" in result["loaded"]  # ranked again


def test_another_focus_needs_the_tags_of_only_the_files_it_shows(tmp_path: Path, teachback_home: Path) -> None:
    root = copy_sample("all", tmp_path / "repo")
    _new_process(root, teachback_home, tokens=300)
    with sqlite3.connect(teachback_home / "repomap.db") as db:
        db.execute("DELETE FROM tags")  # as if pruned: only the stored graph is left

    focused = _new_process(root, teachback_home, tokens=300, focus_paths=["rust"])
    assert focused["text"] == _cold(root, tmp_path, tokens=300, focus_paths=["rust"])
    shown = [line for line in focused["text"].splitlines() if "│" not in line]  # file headers
    # The graph was read back, not rebuilt from all 22 files' tags: only files the ranking
    # reached (those shown, and some that did not fit) were parsed again.
    assert 0 < len(shown) <= focused["parsed"] < 22


def test_an_unreadable_stored_graph_is_rebuilt(tmp_path: Path, teachback_home: Path) -> None:
    root = copy_sample("all", tmp_path / "repo")
    _new_process(root, teachback_home, tokens=300)
    with sqlite3.connect(teachback_home / "repomap.db") as db:
        assert db.execute("UPDATE graphs SET data = ?", (b"not a graph",)).rowcount == 1

    text = _new_process(root, teachback_home, tokens=300, mentioned=["Shape"])["text"]
    assert text == _cold(root, tmp_path, tokens=300, mentioned=["Shape"])


def test_unsaved_editor_text_is_never_stored(tmp_path: Path, teachback_home: Path) -> None:
    root = copy_sample("python", tmp_path / "repo")
    repo_map = RepoMap(root)
    cli = root / "todo" / "cli.py"
    repo_map.update(str(cli), cli.read_text() + "\n\ndef unsaved_shell() -> None:\n    pass\n")
    assert "def unsaved_shell() -> None:" in repo_map.render(tokens=2000)

    with sqlite3.connect(teachback_home / "repomap.db") as db:
        assert db.execute("SELECT count(*) FROM maps WHERE text LIKE '%unsaved_shell%'").fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM graphs").fetchone()[0] == 0
    assert "unsaved_shell" not in _new_process(root, teachback_home, tokens=2000)["text"]


def test_graph_round_trips_through_bytes() -> None:
    tagger = Tagger()
    sources = {
        "shapes.py": "class Shape:\n    def area(self):\n        return 0\n",
        "main.py": "from shapes import Shape\n\nprint(Shape().area())\n",
        "util.c": "int area(int w) { return w; }\n",
    }
    graph = build_graph(
        {
            path: FileParts.of(tagger.extract(language, text.encode()), language)
            for (path, text), language in zip(sources.items(), ("python", "python", "c"))
        }
    )
    again = Graph.from_bytes(graph.to_bytes())
    assert again.files == graph.files and again.idents == graph.idents
    ranking = list(rank_definitions(graph, mentioned=["area"]))
    assert len(ranking) == 3
    assert list(rank_definitions(again, mentioned=["area"])) == ranking
    with pytest.raises(ValueError):
        Graph.from_bytes(b"not a graph")


def _use_cache(path: Path) -> None:
    from agent.repomap.cache import TagCache

    if TagCache(path)._connect() is None:
        raise RuntimeError(f"repo map cache {path} unusable: parsing without it")


@pytest.mark.timeout(120)
def test_processes_that_create_one_cache_at_the_same_moment_all_use_it(tmp_path: Path) -> None:
    """Parallel task attempts start with one new cache file: none may fall back to parsing without it."""
    for round_ in range(50):
        path = tmp_path / f"repomap-{round_}.db"
        assert errors_at_once(_use_cache, path) == [], f"round {round_}"
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA user_version").fetchone()[0] > 0
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
