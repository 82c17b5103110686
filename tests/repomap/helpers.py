"""Shared helpers for the repo map tests: sample codebases copied into a temporary folder."""

from __future__ import annotations

import shutil
from pathlib import Path

SAMPLES = Path(__file__).parent / "samples"
GOLDEN = Path(__file__).parent / "golden"
LANGUAGES = ("python", "javascript", "typescript", "go", "rust", "java", "c", "cpp")


def copy_sample(name: str, dest: Path) -> Path:
    """A fresh copy of samples/<name> (or of every sample, one folder each, for name "all")."""
    if name == "all":
        for language in LANGUAGES:
            shutil.copytree(SAMPLES / language, dest / language)
        return dest
    shutil.copytree(SAMPLES / name, dest)
    return dest
