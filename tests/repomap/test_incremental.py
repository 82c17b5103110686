"""Only what changed is parsed again: across renders, objects, sessions and repositories."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

from agent.repomap import RepoMap
from tests.repomap.helpers import copy_sample

PYTHON_FILES = 3


def test_editing_one_file_reparses_only_that_file(tmp_path: Path) -> None:
    root = copy_sample("python", tmp_path / "repo")
    repo_map = RepoMap(root)
    repo_map.render()
    assert repo_map.parsed_files == PYTHON_FILES
    repo_map.render()
    assert repo_map.parsed_files == 0

    storage = root / "todo" / "storage.py"
    storage.write_text(storage.read_text() + "\n\ndef export_csv(store: TaskStore) -> str:\n    return ''\n")
    text = repo_map.render()
    assert repo_map.parsed_files == 1
    assert "def export_csv(store: TaskStore) -> str:" in text


def test_touched_but_unchanged_file_is_not_reparsed(tmp_path: Path) -> None:
    root = copy_sample("python", tmp_path / "repo")
    repo_map = RepoMap(root)
    before = repo_map.render()
    models = root / "todo" / "models.py"
    stat = models.stat()
    os.utime(models, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    assert repo_map.render() == before
    assert repo_map.parsed_files == 0


def test_cache_is_shared_by_new_objects_and_other_checkouts(tmp_path: Path) -> None:
    root = copy_sample("python", tmp_path / "repo")
    RepoMap(root).render()
    again = RepoMap(root)
    again.render()
    assert again.parsed_files == 0
    other = RepoMap(copy_sample("python", tmp_path / "clone"))
    other.render()
    assert other.parsed_files == 0  # same content, another root: found by content hash


def test_cache_lives_under_teachback_home(tmp_path: Path, teachback_home: Path) -> None:
    RepoMap(copy_sample("python", tmp_path / "repo")).render()
    assert (teachback_home / "repomap.db").is_file()


def test_editor_text_wins_until_the_file_is_reread(tmp_path: Path) -> None:
    root = copy_sample("python", tmp_path / "repo")
    repo_map = RepoMap(root)
    repo_map.render()
    cli = root / "todo" / "cli.py"
    unsaved = cli.read_text() + "\n\ndef shell() -> None:\n    pass\n"
    repo_map.update(str(cli), unsaved)
    assert repo_map.parsed_files == 1
    text = repo_map.render()
    assert "def shell() -> None:" in text
    assert repo_map.parsed_files == 0

    repo_map.update("todo/cli.py")  # closed without saving: the disk content again
    assert "def shell() -> None:" not in repo_map.render()


def test_saved_editor_text_is_not_parsed_twice(tmp_path: Path) -> None:
    root = copy_sample("python", tmp_path / "repo")
    repo_map = RepoMap(root)
    repo_map.render()
    cli = root / "todo" / "cli.py"
    new_text = cli.read_text() + "\n\ndef shell() -> None:\n    pass\n"
    repo_map.update("todo/cli.py", new_text)
    cli.write_text(new_text)
    repo_map.update("todo/cli.py")  # didSave: same content on disk, already parsed
    assert repo_map.parsed_files == 0
    assert "def shell() -> None:" in repo_map.render()


def test_deleted_and_new_files_are_noticed(tmp_path: Path) -> None:
    root = copy_sample("python", tmp_path / "repo")
    repo_map = RepoMap(root)
    assert "todo/cli.py:" in repo_map.render()
    (root / "todo" / "cli.py").unlink()
    (root / "todo" / "web.py").write_text("from .storage import load_store\n\ndef serve():\n    load_store(None)\n")
    text = repo_map.render()
    assert "todo/cli.py:" not in text
    assert "def serve():" in text
    assert repo_map.parsed_files == 1


def test_unusable_cache_file_still_gives_a_map(tmp_path: Path) -> None:
    root = copy_sample("python", tmp_path / "repo")
    bad = tmp_path / "not-a-db"
    bad.write_bytes(b"this is not an SQLite database" * 100)
    repo_map = RepoMap(root, cache_path=bad)
    assert "class TaskStore:" in repo_map.render()
    assert repo_map.parsed_files == PYTHON_FILES


def test_editor_text_is_not_cached_but_saved_text_is(tmp_path: Path) -> None:
    root = copy_sample("python", tmp_path / "repo")
    repo_map = RepoMap(root)
    repo_map.render()
    cli = root / "todo" / "cli.py"
    for version in range(3):  # keystrokes
        repo_map.update("todo/cli.py", cli.read_text() + f"\n\ndef draft_{version}():\n    pass\n")
    saved = cli.read_text() + "\n\ndef draft_2():\n    pass\n"
    cli.write_text(saved)
    repo_map.update("todo/cli.py")
    assert repo_map.parsed_files == 0

    fresh = RepoMap(root)
    assert "def draft_2():" in fresh.render()
    assert fresh.parsed_files == 0  # the saved version's tags reached the shared cache
    assert "draft_0" not in fresh.render()


def test_old_versions_are_pruned_from_the_cache(tmp_path: Path, teachback_home: Path) -> None:
    root = copy_sample("python", tmp_path / "repo")
    repo_map = RepoMap(root)
    models = root / "todo" / "models.py"
    original = models.read_text()
    for version in range(120):
        models.write_text(original + f"\nVERSION = {version}\n")
        os.utime(models, ns=(0, version * 1_000_000_000))
        repo_map.render(tokens=50)
    db = sqlite3.connect(teachback_home / "repomap.db")
    assert db.execute("SELECT count(*) FROM tags").fetchone()[0] > 100
    RepoMap(root).scan()  # a new map prunes on its first scan (a map read back scans nothing)
    assert db.execute("SELECT count(*) FROM tags").fetchone()[0] == PYTHON_FILES


def test_editor_updates_from_another_thread(tmp_path: Path) -> None:
    root = copy_sample("python", tmp_path / "repo")
    repo_map = RepoMap(root)
    repo_map.render()
    base = (root / "todo" / "cli.py").read_text()

    def type_away() -> None:
        for version in range(40):
            repo_map.update("todo/cli.py", base + f"\n\ndef typed_{version}():\n    pass\n")

    typist = threading.Thread(target=type_away)
    typist.start()
    while typist.is_alive():
        assert "class TaskStore:" in repo_map.render(tokens=200)
    typist.join()
    assert "def typed_39():" in repo_map.render(tokens=2000)
