"""Workspaces whose own MCP servers the user has allowed: one file in the user's state
($TEACHBACK_HOME/mcp-allowed.json), mapping each workspace's folder to the fingerprint of the
definitions allowed. A definition that changes (a pull that edits .mcp.json) is not allowed until
the user allows it again."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

from agent.config import ConfigError, teachback_home

ALLOWED_FILE = "mcp-allowed.json"
log = logging.getLogger(__name__)


def allowed_path() -> Path:
    return teachback_home() / ALLOWED_FILE


def allowed(workspace: Path) -> str | None:
    """The fingerprint of the definitions allowed for `workspace`, or None (also when the list
    cannot be read: then nothing is allowed, and the log says why)."""
    try:
        return _read().get(str(Path(workspace).resolve()))
    except ConfigError as exc:
        log.warning("%s", exc)
        return None


def allow(workspace: Path, fingerprint: str) -> None:
    entries = _read()
    entries[str(Path(workspace).resolve())] = fingerprint
    _write(entries)


def revoke(workspace: Path) -> bool:
    """Forget `workspace`; whether it was allowed."""
    entries = _read()
    if entries.pop(str(Path(workspace).resolve()), None) is None:
        return False
    _write(entries)
    return True


def _read() -> dict[str, str]:
    path = allowed_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(
            f"{path} cannot be read ({exc}); it lists the workspaces whose MCP servers you allowed. Delete it "
            "and allow them again with `teachback mcp allow`."
        ) from exc
    workspaces = data.get("workspaces") if isinstance(data, dict) else None
    if not isinstance(workspaces, dict):
        return {}
    return {k: v for k, v in workspaces.items() if isinstance(k, str) and isinstance(v, str)}


def _write(entries: dict[str, str]) -> None:
    path = allowed_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"workspaces": dict(sorted(entries.items()))}, indent=2) + "\n"
    fd, scratch = tempfile.mkstemp(dir=path.parent, prefix=".mcp-allowed-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(scratch, path)  # all or nothing: a crash leaves the old list
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise
