"""Fitting the budget, and what personalisation does to the order."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.repomap import RepoMap, estimate_tokens
from tests.repomap.helpers import copy_sample


def _files(text: str) -> list[tuple[str, list[str]]]:
    """The map as (path, its lines) in order."""
    files: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if "│" in line:
            files[-1][1].append(line)
        else:
            files.append((line.removesuffix(":"), []))
    return files


@pytest.fixture
def all_samples(tmp_path: Path) -> RepoMap:
    return RepoMap(copy_sample("all", tmp_path / "repo"))


@pytest.mark.parametrize("tokens", [0, 5, 20, 64, 200, 512, 5000])
def test_map_fits_the_budget(all_samples: RepoMap, tokens: int) -> None:
    text = all_samples.render(tokens=tokens)
    assert estimate_tokens(text) <= tokens
    if tokens >= 64:
        assert text.count("│") >= 3


def test_budget_is_used_nearly_fully(all_samples: RepoMap) -> None:
    text = all_samples.render(tokens=300)
    assert 250 <= estimate_tokens(text) <= 300


def test_bigger_budget_shows_more_of_the_same(all_samples: RepoMap) -> None:
    small = set(all_samples.render(tokens=150).split())
    large = set(all_samples.render(tokens=600).split())
    assert len(large) > len(small)
    assert small <= large


def test_scopes_are_shown_with_their_members(tmp_path: Path) -> None:
    repo_map = RepoMap(copy_sample("rust", tmp_path / "repo"))
    text = repo_map.render(tokens=1024, mentioned=["new"])
    lines = text.splitlines()
    new_line = next(i for i, line in enumerate(lines) if "pub fn new" in line)
    assert "impl Circle" in lines[new_line - 1]
    assert "pub mod shapes" in text


def test_mentioned_identifier_comes_first(all_samples: RepoMap) -> None:
    plain = all_samples.render(tokens=60)
    assert "list_find" not in plain
    text = all_samples.render(tokens=60, mentioned=["list_find"])
    first_path, first_lines = _files(text)[0]
    assert first_path.startswith("c/list.")
    assert any("list_find" in line for line in first_lines)


def test_focus_file_brings_its_own_definitions_and_neighbours(all_samples: RepoMap) -> None:
    text = all_samples.render(tokens=120, focus_paths=["java/src/shop/Order.java"])
    assert "java/src/shop/Order.java:" in text
    assert "java/src/shop/Priced.java:" in text  # what Order uses


def test_focus_folder_and_edited_files(all_samples: RepoMap) -> None:
    text = all_samples.render(tokens=80, focus_paths=["c"], edited_paths=["c/main.c"])
    assert text.startswith("c/")


def test_estimate_tokens_is_additive_and_stable() -> None:
    a, b = "def add(self, title: str) -> Task:", "    return [t for t in self.tasks]"
    assert estimate_tokens(a + "\n") + estimate_tokens(b + "\n") == estimate_tokens(f"{a}\n{b}\n")
    assert estimate_tokens(a) == 12
    assert estimate_tokens("") == 0
