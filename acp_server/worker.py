"""The process an ACP session's turns run in: `python -m acp_server.worker`.

It speaks agent.session_server's JSON lines to the ACP agent (acp_server.session), like the
language server's worker: the model, the tools and the recorder never hold the process that answers
the editor. What is particular to ACP is opened here: a session with the id the editor was given,
resumed from the store for `session/load`; the editor's MCP servers; and, when the editor offers
`fs/read_text_file` / `fs/write_text_file`, the workspace reads and writes through the editor
(`ClientFiles`, asked over the parent; confinement is checked here first, as for the disk); when it
offers `terminal/*`, run_command runs in the editor's terminal (acp_server.worker_terminal).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any, BinaryIO

from agent.config import Settings
from agent.session_server import (
    LineWriter,
    Opened,
    ParentCallFailed,
    ParentCalls,
    SessionServer,
    serve_with,
    start_worker,
)

log = logging.getLogger(__name__)

WORKER_ARGV = (sys.executable, "-m", "acp_server.worker")
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


def open_params(
    workspace: Path,
    settings: Settings,
    session_id: str,
    *,
    resume: bool,
    client_fs: dict[str, bool],
    mcp_servers: list[dict[str, Any]],
    client_terminal: bool = False,
) -> dict[str, Any]:
    """What the ACP agent sends the worker to open its session."""
    from agent.config import settings_dict

    return {
        "workspace": str(workspace),
        "settings": settings_dict(settings),
        "session_id": session_id,
        "resume": resume,
        "client_fs": client_fs,
        "mcp_servers": mcp_servers,
        "client_terminal": client_terminal,
    }


def _open_recorded(params: dict[str, Any], calls: ParentCalls) -> Opened:
    """Blocking: the session, its recording and its lessons (run in a thread)."""
    from acp_server.worker_terminal import ClientTerminal
    from agent.runtime import open_session
    from feedback_store import StoreError, attach, open_store
    from feedback_store.lessons.book import book_for

    settings = Settings().replace(**params["settings"])
    root = Path(params["workspace"])
    warnings: list[str] = []
    store = None
    if settings.record or params["resume"]:
        try:
            store = open_store(settings.db_path())
        except StoreError as exc:
            warnings.append(f"teachback is not recording feedback: {exc}")
    history = None
    if params["resume"] and store is not None:
        try:
            history = store.conversation(params["session_id"])
        except StoreError as exc:  # never recorded (record = false): it starts afresh
            warnings.append(f"the session starts afresh: {exc}")
    extra = _mcp_servers(params["mcp_servers"], root, warnings)
    session = open_session(
        root,
        settings,
        frontend="acp",
        session_id=params["session_id"],
        history=history,
        lessons=book_for(settings),
        terminal=ClientTerminal(calls) if params.get("client_terminal") else None,
        **extra,
    )
    fs = params["client_fs"]
    if fs.get("read") or fs.get("write"):
        session.workspace.attach_editor(ClientFiles(calls, read=bool(fs.get("read")), write=bool(fs.get("write"))))
    recording = attach(session, store) if store is not None and settings.record else None

    def on_close() -> None:
        if recording is not None:
            recording.close(close_store=True)
        elif store is not None:
            store.close()
        if session.lessons is not None:
            session.lessons.close()

    info = {
        "recording": str(settings.db_path()) if recording is not None else "off",
        "warnings": warnings,
        "context_window": context_window(settings),
    }
    return Opened(session, session.workspace.overlay, info, on_close)


def context_window(settings: Settings) -> int:
    """The model's context window: the configured `context_size`, else litellm's model table, else the
    context the embedded model loads; 0 when none knows it (the editor then gets no usage_update)."""
    from agent.llm import load_litellm

    if settings.context_size:
        return settings.context_size
    litellm = load_litellm()
    try:
        info = litellm.get_model_info(settings.model)
    except Exception as exc:  # litellm raises a bare Exception for a model it does not list
        log.debug("no context window known for %s: %s", settings.model, exc)
        info = {}
    known = int(info.get("max_input_tokens") or info.get("max_tokens") or 0)
    if known or not settings.model.startswith("local/"):
        return known
    from agent.providers.llama_engine import DEFAULT_CONTEXT

    return DEFAULT_CONTEXT


def _mcp_servers(entries: list[dict[str, Any]], root: Path, warnings: list[str]) -> dict[str, Any]:
    """The editor's MCP servers as open_session takes them (none when this build has no MCP client)."""
    if not entries:
        return {}
    try:
        from agent.mcp.config import parse_server
    except ImportError:
        names = ", ".join(entry["name"] for entry in entries)
        warnings.append(
            f"the editor's MCP servers ({names}) were kept but not started: this teachback has no MCP client"
        )
        return {}
    source = "the editor (ACP session)"
    return {"mcp_servers": [parse_server(e["name"], e["entry"], source, root) for e in entries]}


# -- the worker process ---------------------------------------------------------------------------


def main() -> int:
    out = start_worker("acp-worker")
    threading.Thread(target=_warm_up, name="teachback-warm-up", daemon=True).start()
    asyncio.run(_serve(out))
    return 0


def _warm_up() -> None:
    import agent.runtime  # noqa: F401
    import feedback_store.recording.recorder  # noqa: F401
    from agent.llm import load_litellm

    load_litellm()


async def _serve(out: BinaryIO) -> None:
    writer = LineWriter(out)
    calls = ParentCalls(writer.send)

    async def opener(params: dict[str, Any]) -> Opened:
        return await asyncio.to_thread(_open_recorded, params, calls)

    await serve_with(SessionServer(opener, writer, calls), sys.stdin.buffer)
    # The session is closed and its events recorded; a model call still computing in a thread must
    # not hold the exit.
    out.flush()
    logging.shutdown()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
