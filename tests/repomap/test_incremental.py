"""Only what changed is parsed again: across renders, objects, sessions and repositories."""

from __future__ import annotations

import os
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
