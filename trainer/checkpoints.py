"""Training checkpoints: the adapter's weights, the optimizer, the EMA teacher, the random state and
the losses so far, one file per checkpoint, written whole or not at all (a kill mid-write leaves the
previous checkpoint as the latest)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

KEEP = 2
_NAME = re.compile(r"step-(\d+)\.pt")


def directory(out: Path) -> Path:
    return out / "checkpoints"


def save(out: Path, step: int, state: dict[str, Any]) -> Path:
    import torch

    folder = directory(out)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"step-{step:06d}.pt"
    partial = path.with_suffix(".pt.partial")
    torch.save(state, partial)
    os.replace(partial, path)
    for old in _checkpoints(out)[:-KEEP]:
        old.unlink()
    return path


def latest(out: Path) -> dict[str, Any] | None:
    import torch

    found = _checkpoints(out)
    return torch.load(found[-1], weights_only=True) if found else None


def remove(out: Path) -> None:
    folder = directory(out)
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        if _NAME.fullmatch(path.name) or path.name.endswith(".pt.partial"):
            path.unlink()
    if not any(folder.iterdir()):
        folder.rmdir()


def _checkpoints(out: Path) -> list[Path]:
    folder = directory(out)
    if not folder.is_dir():
        return []
    return sorted(
        (p for p in folder.iterdir() if _NAME.fullmatch(p.name)), key=lambda p: int(_NAME.fullmatch(p.name)[1])
    )
