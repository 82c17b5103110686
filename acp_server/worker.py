"""The process an ACP session's turns run in: `python -m acp_server.worker`.

It speaks agent.session_server's JSON lines to the ACP agent (acp_server.session), like the
language server's worker: the model, the tools and the recorder never hold the process that answers
the editor. What is particular to ACP is opened here: a session with the id the editor was given,
resumed from the store for `session/load`; the editor's MCP servers; and, when the editor offers
`fs/read_text_file` / `fs/write_text_file`, the workspace reads and writes through the editor
(acp_server.worker_files: asked over the parent; confinement is checked here first, as for the
disk); when it offers `terminal/*`, the agent's commands run in the editor's terminal
(acp_server.worker_terminal). The process itself is host.worker's, as the language server's is.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agent.config import Settings
from agent.session_server import Opened, ParentCalls

WORKER = "acp_server.worker"


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


def _open(params: dict[str, Any], calls: ParentCalls) -> Opened:
    """Blocking: the session, recorded unless the settings or the database say otherwise, resumed
    from the store for `session/load` (run in a thread)."""
    from acp_server.worker_files import ClientFiles
    from acp_server.worker_terminal import ClientTerminal
    from agent.model_names import context_window
    from host.session import IfNoStore, open_recorded

    settings = Settings().replace(**params["settings"])
    root = Path(params["workspace"])
    warnings: list[str] = []
    extra = _mcp_servers(params["mcp_servers"], root, warnings)
    hosted = open_recorded(
        root,
        settings,
        frontend="acp",
        if_no_store=IfNoStore.UNRECORDED,
        session_id=params["session_id"],
        resume=params["resume"],
        terminal=ClientTerminal(calls) if params.get("client_terminal") else None,
        **extra,
    )
    session = hosted.session
    fs = params["client_fs"]
    if fs.get("read") or fs.get("write"):
        session.workspace.attach_editor(ClientFiles(calls, read=bool(fs.get("read")), write=bool(fs.get("write"))))
    info = {
        "recording": hosted.recording_at or "off",
        "warnings": [*hosted.warnings, *warnings],
        "context_window": context_window(settings),
    }
    return Opened(session, session.workspace.overlay, info, hosted.close)


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


if __name__ == "__main__":
    from host.worker import worker_main

    sys.exit(worker_main("acp-worker", _open))
