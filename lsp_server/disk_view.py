"""The file on disk under each open buffer, as the editor last read or wrote it.

Editors notice a file that changed under an open buffer by its modification time (and size), not
by its content: eglot applies an edit through `find-file-noselect`, which asks "File a.py changed
on disk. Reread from disk?"; Emacs asks again when the changed buffer is saved, and Vim and Neovim
warn that the file "has been changed since reading it" on `:w`. The agent writes to disk while it
works, so that the commands it runs see its edits. Before the editor is asked to change an open
buffer, that file is put back exactly as the editor last saw it (bytes and times), so the buffer is
the one place the change arrives: the editor applies it without a question, its undo takes it
back, and saving it writes it. Only files the editor holds open are remembered.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from agent.safe_write import SafeWriteError, unlink_inside, write_inside
from agent.workspace import decode_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DiskState:
    """A file's bytes and times (data None: no file there)."""

    data: bytes | None
    atime_ns: int = 0
    mtime_ns: int = 0


class DiskView:
    """While the agent may write (a turn, an undo, a rejection): the open files' states before it."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._states: dict[str, DiskState] = {}
        self._watching = 0
        self.unsaved: set[str] = set()  # buffers holding agent changes their files do not have yet

    @contextlib.contextmanager
    def watch(self, paths: Iterable[str]) -> Iterator[None]:
        """Remember `paths` (workspace-relative) as they are now, until the block ends."""
        if not self._watching:
            self._states = {path: self.read(path) for path in paths}
        self._watching += 1
        try:
            yield
        finally:
            self._watching -= 1
            if not self._watching:
                self._states.clear()

    def saw(self, path: str) -> None:
        """The editor has just read or saved `path` (opened or saved a buffer): that is its view now."""
        self.unsaved.discard(path)
        if self._watching:
            self._states[path] = self.read(path)

    def text(self, path: str) -> str | None:
        """What is on disk at `path` as text (None: no file there)."""
        data = self.read(path).data
        return None if data is None else decode_text(data, path)

    def settle(self, paths: Iterable[str], buffers: Mapping[str, str]) -> dict[str, DiskState]:
        """Put each of `paths` (files the agent changed) back as the editor last saw it, unless its
        buffer (`buffers`: path -> text) already holds what is on disk now (the editor re-read it).
        Returns what the files put back held, so a refused edit can write it again."""
        replaced = {}
        for path in paths:
            seen = self._states.get(path)
            if seen is None:
                continue
            current = self.read(path)
            if current == seen:
                continue
            text = buffers.get(path)
            if current.data != seen.data and text is not None and current.data == text.encode("utf-8", "replace"):
                continue
            try:
                self.put(path, seen)
            except (OSError, SafeWriteError) as exc:
                log.warning("could not put %s back as the editor last saw it: %s", path, exc)
                continue
            replaced[path] = current
        return replaced

    def read(self, path: str) -> DiskState:
        try:
            with open(self.root / path, "rb") as handle:
                info = os.fstat(handle.fileno())
                return DiskState(handle.read(), info.st_atime_ns, info.st_mtime_ns)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return DiskState(None)

    def put(self, path: str, state: DiskState) -> None:
        """Write `state` at `path`, times included, never through a link."""
        if state.data is None:
            unlink_inside(self.root, path)
            return
        write_inside(self.root, path, state.data)
        os.utime(self.root / path, ns=(state.atime_ns, state.mtime_ns), follow_symlinks=False)
