"""Where the language server's agent runs, and the worker process that runs it.

With `turn_process = "worker"` (the default) the session lives in a child process,
`python -m lsp_server.worker` (host.worker): the child starts when the editor sends `initialized`
and warms up its imports while it waits for the first request that needs the agent. With
`turn_process = "inline"` the session lives in the server's own process, as it used to.

Either way the session is opened here, the same way: recorded (host.session; a database that cannot
be opened leaves it unrecorded, with a warning), and the editor's buffers flowing into the workspace
overlay and the repo map.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.config import Settings, settings_dict
from lsp_server.documents import OverlaySink
from lsp_server.mapfeed import MapFeeder, Tee

if TYPE_CHECKING:  # the agent is imported when a session opens, not when the server starts
    from agent.session import Session
    from host.session import HostedSession

WORKER = "lsp_server.worker"


def open_hosted(root: Path, settings: Settings) -> HostedSession:
    """A session on `root`, recorded unless the settings or the database say otherwise. Blocking."""
    from host.session import IfNoStore, open_recorded

    return open_recorded(root, settings, frontend="lsp", if_no_store=IfNoStore.UNRECORDED)


def recording_info(hosted: HostedSession) -> str:
    """Where the session records, as the editor is told."""
    return hosted.recording_at or f"off ({hosted.why_not})"


def overlay_sink(session: Session) -> OverlaySink:
    """Where open buffers go: the session's overlay, and its repo map when it has one."""
    if session.context.repo_map is None:
        return session.workspace.overlay
    return Tee(session.workspace.overlay, MapFeeder(session.context.repo_map))


def open_params(root: Path, settings: Settings) -> dict[str, Any]:
    """What the parent sends the worker to open its session."""
    return {"workspace": str(root), "settings": settings_dict(settings)}


def _open(params: dict[str, Any], calls: Any) -> Any:
    from agent.session_server import Opened

    hosted = open_hosted(Path(params["workspace"]), Settings().replace(**params["settings"]))
    info = {"recording": recording_info(hosted), "warnings": hosted.warnings}
    return Opened(hosted.session, overlay_sink(hosted.session), info, hosted.close)


if __name__ == "__main__":
    from host.worker import worker_main

    sys.exit(worker_main("worker", _open))
