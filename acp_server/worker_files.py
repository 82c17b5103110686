"""The editor's file system as the worker reaches it: `fs/read_text_file` and `fs/write_text_file`,
asked of the ACP agent process, which asks the editor."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from agent.session_server import ParentCallFailed, ParentCalls

log = logging.getLogger(__name__)

CLIENT_TIMEOUT = 30.0  # seconds the editor gets to answer one fs/* call before the disk answers
READ, WRITE = "fs/read_text_file", "fs/write_text_file"


class ClientFiles:
    """The editor's file system (agent.workspace.EditorFiles), reached through the parent. A call
    the editor cannot answer falls back on the disk; so does one made on the event loop's thread,
    which must stay free to read the answer."""

    def __init__(self, calls: ParentCalls, *, read: bool, write: bool) -> None:
        self._calls = calls
        self._read = read
        self._write = write

    def read(self, path: Path) -> str | None:
        if not self._read or _on_event_loop():
            return None
        try:
            answer = self._calls.call(READ, {"path": str(path)}, CLIENT_TIMEOUT)
        except ParentCallFailed as exc:
            log.info("the editor did not read %s (%s); reading the disk", path, exc)
            return None
        content = answer.get("content") if isinstance(answer, dict) else None
        return content if isinstance(content, str) else None

    def write(self, path: Path, text: str) -> bool:
        if not self._write or _on_event_loop():
            return False
        try:
            self._calls.call(WRITE, {"path": str(path), "content": text}, CLIENT_TIMEOUT)
        except ParentCallFailed as exc:
            log.warning("the editor did not write %s (%s); writing the disk", path, exc)
            return False
        # Commands the agent runs read the disk: an editor that kept the text in an unsaved buffer
        # has the workspace write it too.
        try:
            return path.read_bytes() == text.encode("utf-8")
        except OSError:
            return False


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
