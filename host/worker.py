"""The worker process a door runs its session in (`python -m lsp_server.worker`,
`python -m acp_server.worker`), and the spare one a door starts ahead of its session.

A worker speaks agent.session_server's JSON lines to its door: the model, the tools, the repo map
and the recorder then never hold the process that answers the editor, and the worker runs at lower
priority. It warms up its imports (litellm among them) while it waits for `open`; what the session
is opened with is the door's (`open_blocking`, run in a thread).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.remote import RemoteSession, WorkerStopped

log = logging.getLogger(__name__)


def warm_up_imports() -> None:
    """Import the agent, litellm and the store ahead of the first turn (seconds of work)."""
    import agent.runtime  # noqa: F401
    import host.session  # noqa: F401  (the store and its recorder)
    from agent.llm import load_litellm

    load_litellm()


def worker_main(name: str, open_blocking: Callable[[dict[str, Any], Any], Any]) -> int:
    """Serve one session on stdin/stdout until the door closes it. `open_blocking(params, calls)`
    opens it (an agent.session_server.Opened); `calls` reach the door (agent.session_server.ParentCalls)."""
    from agent.session_server import start_worker

    out = start_worker(name)
    threading.Thread(target=warm_up_imports, name="teachback-warm-up", daemon=True).start()
    asyncio.run(_serve(out, open_blocking))
    return 0


async def _serve(out: Any, open_blocking: Callable[[dict[str, Any], Any], Any]) -> None:
    from agent.session_server import LineWriter, ParentCalls, SessionServer, serve_with

    writer = LineWriter(out)
    calls = ParentCalls(writer.send)

    async def opener(params: dict[str, Any]) -> Any:
        return await asyncio.to_thread(open_blocking, params, calls)

    await serve_with(SessionServer(opener, writer, calls), sys.stdin.buffer)
    # The session is closed and its events recorded. A model call still computing in a thread (the
    # embedded model stops only between tokens) must not hold the exit, as it would in asyncio.run.
    out.flush()
    logging.shutdown()
    os._exit(0)


class SpareWorker:
    """A worker process started ahead of the session it will serve, so that it warms up its imports
    meanwhile; `take()` hands it over (or a new one, when none was started or it died)."""

    def __init__(self, module: str, root: Path | None = None, on_stop: Callable[[str], None] | None = None) -> None:
        self.argv = (sys.executable, "-m", module)
        self.root = root or Path.cwd()  # matters only to a door that writes files itself
        self.on_stop = on_stop
        self._worker: RemoteSession | None = None

    def _ready(self) -> RemoteSession:
        if self._worker is None or not self._worker.alive:
            self._worker = RemoteSession(self.argv, self.root, on_stop=self.on_stop)
        return self._worker

    async def start(self) -> None:
        """Start the spare now (a failure is logged: the session starts one when it opens)."""
        try:
            await self._ready().spawn()
        except WorkerStopped as exc:
            log.warning("could not start the agent's process ahead of time: %s", exc)

    def take(self) -> RemoteSession:
        worker, self._worker = self._ready(), None
        return worker

    async def close(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            await worker.close()
