"""The map of each sample codebase, byte for byte. Regenerate after an intended change with
TEACHBACK_UPDATE_GOLDEN=1 and review the diff."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.repomap import RepoMap, estimate_tokens
from tests.repomap.helpers import GOLDEN, LANGUAGES, copy_sample

CASES = [(language, {"tokens": 1024}) for language in LANGUAGES] + [
    ("python-budget", {"tokens": 60, "mentioned": ["load_store"]}),
    ("all-focus", {"tokens": 400, "focus_paths": ["go/cache.go"], "mentioned": ["Circle"]}),
]


def _check(name: str, text: str) -> None:
    golden = GOLDEN / f"{name}.txt"
    if os.environ.get("TEACHBACK_UPDATE_GOLDEN"):
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8")


@pytest.mark.parametrize(("name", "options"), CASES, ids=[c[0] for c in CASES])
def test_map_matches_golden(name: str, options: dict, tmp_path: Path) -> None:
    root = copy_sample(name.split("-")[0], tmp_path / "repo")
    text = RepoMap(root).render(**options)
    _check(name, text)
    assert estimate_tokens(text) <= options["tokens"]


def test_every_language_contributes_definitions(tmp_path: Path) -> None:
    root = copy_sample("all", tmp_path / "repo")
    text = RepoMap(root).render(tokens=4000)
    for language in LANGUAGES:
        assert f"\n{language}/" in f"\n{text}", f"no {language} file on the map"
