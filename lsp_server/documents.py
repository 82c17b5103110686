"""The editor's open documents, mirrored into the agent's workspace overlay.

Only `file:` URIs inside the workspace reach the overlay, keyed by their workspace-relative path,
so the agent reads what the user sees, unsaved changes included. Any other document (`untitled:`
buffers, other schemes, files outside the workspace) is kept here by URI only: its text can be
sent to the agent as context, but it is never mapped to a path on disk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlparse

from pygls.uris import to_fs_path

from lsp_server.edits import OpenDocument


class OverlaySink(Protocol):
    """Where open buffers go: the agent workspace's overlay."""

    def set(self, path: str, text: str, version: int | None = None) -> None: ...

    def remove(self, path: str) -> None: ...


@dataclass(frozen=True)
class DocumentRef:
    """Where a document URI points: a workspace path, or why it has none."""

    uri: str
    path: str | None  # workspace-relative, posix separators
    reason: str | None = None  # set when path is None

    @property
    def label(self) -> str:
        return self.path or self.uri


def locate(uri: str, root: Path) -> DocumentRef:
    """Map a document URI to a workspace-relative path, deliberately refusing anything else."""
    scheme = urlparse(uri).scheme
    if scheme != "file":
        kind = "an unsaved buffer" if scheme == "untitled" else f"a {scheme or 'scheme-less'} document"
        return DocumentRef(uri, None, f"{uri} is {kind}, not a file in the workspace")
    fs_path = to_fs_path(uri)
    if not fs_path:
        return DocumentRef(uri, None, f"{uri} names no local file")
    resolved = Path(os.path.realpath(fs_path))
    base = root.resolve()
    if resolved != base and base not in resolved.parents:
        return DocumentRef(uri, None, f"{fs_path} is outside the workspace {base}")
    if resolved == base:
        return DocumentRef(uri, None, f"{fs_path} is the workspace folder itself")
    return DocumentRef(uri, resolved.relative_to(base).as_posix())


@dataclass
class _Buffer:
    ref: DocumentRef
    version: int
    text: str


class Documents:
    """Open buffers by URI; the ones inside the workspace are pushed to the overlay when attached."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._buffers: dict[str, _Buffer] = {}
        self._sink: OverlaySink | None = None

    def attach(self, sink: OverlaySink, skip: set[str] | None = None) -> None:
        """Mirror into `sink`, beginning with every buffer already open (but the paths in `skip`)."""
        self._sink = sink
        for buffer in self._buffers.values():
            if buffer.ref.path not in (skip or set()):
                self._push(buffer)

    def opened(self, uri: str, text: str, version: int) -> DocumentRef:
        buffer = _Buffer(locate(uri, self.root), version, text)
        self._buffers[uri] = buffer
        self._push(buffer)
        return buffer.ref

    def changed(self, uri: str, text: str, version: int) -> DocumentRef:
        buffer = self._buffers.get(uri)
        if buffer is None:  # a change without an open: treat it as one
            return self.opened(uri, text, version)
        buffer.text, buffer.version = text, version
        self._push(buffer)
        return buffer.ref

    def closed(self, uri: str) -> DocumentRef:
        buffer = self._buffers.pop(uri, None)
        ref = buffer.ref if buffer else locate(uri, self.root)
        if ref.path is not None and self._sink is not None:
            self._sink.remove(ref.path)
        return ref

    def get(self, uri: str) -> OpenDocument | None:
        buffer = self._buffers.get(uri)
        return OpenDocument(buffer.version, buffer.text) if buffer else None

    def ref(self, uri: str) -> DocumentRef:
        buffer = self._buffers.get(uri)
        return buffer.ref if buffer else locate(uri, self.root)

    def by_path(self) -> dict[str, OpenDocument]:
        """Open workspace files, keyed by workspace-relative path."""
        return {b.ref.path: OpenDocument(b.version, b.text) for b in self._buffers.values() if b.ref.path is not None}

    def uri_for_path(self, path: str) -> str | None:
        for uri, buffer in self._buffers.items():
            if buffer.ref.path == path:
                return uri
        return None

    def __len__(self) -> int:
        return len(self._buffers)

    def _push(self, buffer: _Buffer) -> None:
        if buffer.ref.path is not None and self._sink is not None:
            self._sink.set(buffer.ref.path, buffer.text, buffer.version)
