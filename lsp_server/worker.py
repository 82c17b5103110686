"""Where the language server's agent runs, and the worker process that runs it.

With `turn_process = "worker"` (the default) the session lives in a child process,
`python -m lsp_server.worker`, that speaks agent.session_server's JSON lines: the model, the tools,
the repo map and the recorder then never hold the server's interpreter, and the child runs at
lower priority, so the editor's requests are answered first. The child starts when the editor
sends `initialized` and warms up its imports (litellm among them) while it waits for the first
request that needs the agent. With `turn_process = "inline"` the session lives in the server's own
process, as it used to.

Either way the session is opened here, the same way: with the feedback recorder attached, and
the editor's buffers flowing into the workspace overlay and the repo map.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from agent.config import Settings, settings_dict
from lsp_server.documents import OverlaySink
from lsp_server.mapfeed import MapFeeder, Tee

if TYPE_CHECKING:  # the agent is imported when a session opens, not when the server starts
    from agent.session import Session
    from feedback_store.recording.recording import Recording

log = logging.getLogger(__name__)

WORKER_ARGV = (sys.executable, "-m", "lsp_server.worker")


def warm_up_imports() -> None:
    """Import the agent, litellm and the store ahead of the first turn (seconds of work)."""
    import agent.runtime  # noqa: F401
    import feedback_store.recording.recorder  # noqa: F401
    from agent.llm import load_litellm

    load_litellm()


def open_recorded(root: Path, settings: Settings) -> tuple[Session, Recording | None, str, list[str]]:
    """A session on `root` with its recording attached: (session, recording or None, where it
    records, warnings for the user). Blocking: call it in a thread."""
    from agent.runtime import open_session
    from feedback_store.lessons.book import book_for

    session = open_session(root, settings, frontend="lsp", lessons=book_for(settings))
    if not settings.record:
        return session, None, "off (record = false)", []
    try:
        from feedback_store import StoreError, attach, open_store
    except ImportError as exc:
        return session, None, f"off ({exc})", [f"teachback is not recording feedback: {exc}"]
    try:
        store = open_store(settings.db_path())
    except StoreError as exc:
        return session, None, f"off ({exc})", [f"teachback is not recording feedback: {exc}"]
    return session, attach(session, store), str(settings.db_path()), []


def overlay_sink(session: Session) -> OverlaySink:
    """Where open buffers go: the session's overlay, and its repo map when it has one."""
    if session.context.repo_map is None:
        return session.workspace.overlay
    return Tee(session.workspace.overlay, MapFeeder(session.context.repo_map))


def open_params(root: Path, settings: Settings) -> dict[str, Any]:
    """What the parent sends the worker to open its session."""
    return {"workspace": str(root), "settings": settings_dict(settings)}


# -- the worker process ---------------------------------------------------------------------------


async def _open(params: dict[str, Any]) -> Any:
    from agent.session_server import Opened

    settings = Settings().replace(**params["settings"])
    session, recording, where, warnings = await asyncio.to_thread(open_recorded, Path(params["workspace"]), settings)

    def on_close() -> None:
        if recording is not None:
            recording.close(close_store=True)
        if session.lessons is not None:
            session.lessons.close()

    return Opened(session, overlay_sink(session), {"recording": where, "warnings": warnings}, on_close)


def main() -> int:
    from agent.session_server import start_worker

    out = start_worker("worker")
    threading.Thread(target=warm_up_imports, name="teachback-warm-up", daemon=True).start()
    asyncio.run(_serve(out))
    return 0


async def _serve(out: BinaryIO) -> None:
    from agent.session_server import serve

    await serve(_open, sys.stdin.buffer, out)
    # The session is closed and its events recorded. A model call still computing in a thread (the
    # embedded model stops only between tokens) must not hold the exit, as it would in asyncio.run.
    out.flush()
    logging.shutdown()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
