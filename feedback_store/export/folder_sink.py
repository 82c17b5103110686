"""A folder of trajectories, one `<session id>.json` each (feedback_store.export.atif), written like
`export_io.Sink` writes its file: into a hidden folder beside it first, moved into place by `finish`,
so an export that fails leaves no half-written folder and takes back the files it put in place."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from agent.protocol import LONE_SURROGATE
from feedback_store.export.export_io import cannot_write, make_folders, remove_empty

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def file_name(session_id: str) -> str:
    """A session id as a file name that is the id itself wherever the id is safe as one."""
    name = _UNSAFE.sub("_", session_id)[:200].lstrip(".")
    return f"{name or 'session'}.json"


class TrajectoryFolder:
    """One trajectory per file in the folder `path`; same interface as export_io.Sink."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0
        self.names: set[str] = set()
        self.staging: Path | None = None
        self.made: list[Path] = []
        self.placed: list[Path] = []  # files put in place where there were none

    def __len__(self) -> int:
        return self.count

    def __enter__(self) -> TrajectoryFolder:
        try:
            if self.path.exists() and not self.path.is_dir():
                raise FileExistsError(17, "it is a file, not a folder (end --out with .jsonl for one file)")
            self.made = make_folders(self.path.parent)
            self.staging = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.", dir=self.path.parent))
        except OSError as exc:
            remove_empty(self.made)
            raise cannot_write(self.path, exc) from exc
        return self

    def add(self, record: dict[str, Any], memo: object = None) -> None:
        assert self.staging is not None
        name = file_name(str(record.get("session_id") or "session"))
        while name in self.names:  # two stores' sessions of one id, or ids that differ only in unsafe characters
            name = f"{name.removesuffix('.json')}-{self.count}.json"
        self.names.add(name)
        text = json.dumps(record, ensure_ascii=False, indent=1)
        if not text.isascii() and LONE_SURROGATE.search(text):  # what the model sent: no file can hold it
            text = LONE_SURROGATE.sub("\ufffd", text)
        try:
            (self.staging / name).write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            raise cannot_write(self.path / name, exc) from exc
        self.count += 1

    def finish(self) -> None:
        if not self.count or self.staging is None:
            return
        try:
            self.made += make_folders(self.path)
            for name in sorted(self.names):
                target = self.path / name
                new = not os.path.lexists(target)
                os.replace(self.staging / name, target)
                if new:
                    self.placed.append(target)
        except OSError as exc:
            raise cannot_write(self.path, exc) from exc

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if self.staging is not None:
            shutil.rmtree(self.staging, ignore_errors=True)
        if kind is not None:  # the export failed: what it wrote goes too
            for placed in self.placed:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(placed)
            remove_empty(self.made)
