"""Workspaces whose own MCP servers and hooks the user has allowed: one file in the user's state
($TEACHBACK_HOME/mcp-allowed.json), mapping each workspace's folder to the fingerprint of the
definitions allowed, one map per kind of definition (MCP servers, hooks). A definition that changes
(a pull that edits .mcp.json or .claude/settings.json) is not allowed until the user allows it again."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

from agent.config import ConfigError, teachback_home

ALLOWED_FILE = "mcp-allowed.json"
# Each kind of definition and its map in the file ("workspaces": the MCP servers, as first written).
SECTIONS = {"mcp": "workspaces", "hooks": "hooks"}
log = logging.getLogger(__name__)


def allowed_path() -> Path:
    return teachback_home() / ALLOWED_FILE


def allowed(workspace: Path, kind: str = "mcp") -> str | None:
    """The fingerprint of the definitions of `kind` allowed for `workspace`, or None (also when the
    list cannot be read: then nothing is allowed, and the log says why)."""
    try:
        return _read()[SECTIONS[kind]].get(str(Path(workspace).resolve()))
    except ConfigError as exc:
        log.warning("%s", exc)
        return None


def allow(workspace: Path, fingerprint: str, kind: str = "mcp") -> None:
    sections = _read()
    sections[SECTIONS[kind]][str(Path(workspace).resolve())] = fingerprint
    _write(sections)


def revoke(workspace: Path, kind: str = "mcp") -> bool:
    """Forget `workspace`'s definitions of `kind`; whether they were allowed."""
    sections = _read()
    if sections[SECTIONS[kind]].pop(str(Path(workspace).resolve()), None) is None:
        return False
    _write(sections)
    return True


def _read() -> dict[str, dict[str, str]]:
    """Each section's map of workspace -> fingerprint (empty where the file has none)."""
    path = allowed_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {section: {} for section in SECTIONS.values()}
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(
            f"{path} cannot be read ({exc}); it lists the workspaces whose MCP servers you allowed. Delete it "
            "and allow them again with `teachback mcp allow`."
        ) from exc
    return {section: _entries(data.get(section) if isinstance(data, dict) else None) for section in SECTIONS.values()}


def _entries(found: object) -> dict[str, str]:
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)}


def _write(sections: dict[str, dict[str, str]]) -> None:
    path = allowed_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = {section: dict(sorted(entries.items())) for section, entries in sections.items() if entries}
    text = json.dumps({"workspaces": {}, **kept}, indent=2) + "\n"
    fd, scratch = tempfile.mkstemp(dir=path.parent, prefix=".mcp-allowed-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(scratch, path)  # all or nothing: a crash leaves the old list
    except BaseException:
        Path(scratch).unlink(missing_ok=True)
        raise
