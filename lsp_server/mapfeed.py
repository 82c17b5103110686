"""Editor buffers into the repo map as they change, so the map is current without a rescan.

Re-parsing happens in a worker thread, never on the server's event loop, and a burst of
keystrokes in one file costs one parse: only the latest text of each path is kept.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lsp_server.documents import OverlaySink


class MapFeeder:
    """An OverlaySink that hands buffer text to `repo_map.update` (None text: re-read the disk)."""

    def __init__(self, repo_map: Any) -> None:
        self._map = repo_map
        self._pending: dict[str, str | None] = {}
        self._task: asyncio.Task[None] | None = None

    def set(self, path: str, text: str, version: int | None = None) -> None:
        self._pending[path] = text
        self._kick()

    def remove(self, path: str) -> None:
        self._pending[path] = None
        self._kick()

    async def drained(self) -> None:
        """Wait until every pending change has reached the map."""
        while self._task is not None and not self._task.done():
            await self._task

    def _kick(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while self._pending:
            path = next(iter(self._pending))
            text = self._pending.pop(path)
            await asyncio.to_thread(self._map.update, path, text)


class Tee:
    """One OverlaySink that forwards to several."""

    def __init__(self, *sinks: OverlaySink) -> None:
        self._sinks = sinks

    def set(self, path: str, text: str, version: int | None = None) -> None:
        for sink in self._sinks:
            sink.set(path, text, version)

    def remove(self, path: str) -> None:
        for sink in self._sinks:
            sink.remove(path)
