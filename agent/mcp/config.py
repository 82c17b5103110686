"""Which MCP servers a session starts: `[mcp_servers.NAME]` tables in the user's teachback.toml and
the workspace's, and a workspace's `.mcp.json` (`mcpServers`, the format Claude Code reads).

A workspace's own servers (its teachback.toml tables and its .mcp.json) start only once the user has
allowed them (`teachback mcp allow`, agent.mcp.trust): a cloned repository must not be able to start
programs on its own. Until then they are reported, with how to allow them, and nothing starts.

A server whose entry cannot be used is kept with the problem, so the session and `teachback doctor`
say what to fix instead of failing as a whole. Values may name environment variables as `${VAR}` or
`${VAR:-default}` (as .mcp.json files do), so tokens need not be written into the files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.config import CONFIG_FILE, SERVERS_TABLE, config_table, user_config_path
from agent.mcp import trust

CLAUDE_FILE = ".mcp.json"
NAME = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
KEYS = ("command", "args", "env", "cwd", "url", "headers", "startup_timeout", "call_timeout")
CLAUDE_KEYS = ("type", "command", "args", "env", "cwd", "url", "headers")
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server: a program spoken to over stdio (`command`), or a streamable-HTTP endpoint
    (`url`). `problem` set: the entry cannot be used, and says why and how to fix it."""

    name: str
    source: str  # the file (or the client) that defined it
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None  # relative to the workspace; None: the workspace root
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    startup_timeout: float | None = None  # None: the mcp_startup_timeout setting
    call_timeout: float | None = None  # None: the mcp_call_timeout setting
    problem: str | None = None

    def describe(self) -> str:
        if self.url:
            return self.url
        return shlex.join([self.command, *self.args]) if self.command else ""


@dataclass(frozen=True)
class Withheld:
    """A workspace's own servers, not started because the user has not allowed them (or they
    changed since)."""

    workspace: Path
    files: tuple[str, ...]
    names: tuple[str, ...]
    changed: bool  # allowed before, with other definitions

    def notice(self) -> str:
        what = ", ".join(self.names) or "(none readable)"
        why = (
            "they changed since you allowed them"
            if self.changed
            else "a cloned repository must not start programs on its own"
        )
        return (
            f"This workspace defines MCP servers in {' and '.join(self.files)} ({what}) that were not started: "
            f"{why}. If you trust them, run `teachback mcp allow --workspace {self.workspace}` "
            "(`teachback doctor` shows what they would run)."
        )


@dataclass(frozen=True)
class ServerSet:
    servers: tuple[ServerConfig, ...] = ()
    withheld: Withheld | None = None


def load_servers(workspace: Path, env: Mapping[str, str] | None = None) -> ServerSet:
    """The servers a session on `workspace` starts: the user's, then the workspace's .mcp.json, then
    its teachback.toml (a later entry of one name replaces an earlier one), the workspace's only if
    allowed."""
    env = os.environ if env is None else env
    root = Path(workspace).resolve()
    found: dict[str, ServerConfig] = {}
    for server in _from_toml(user_config_path(), root, env):
        found[server.name] = server
    own = workspace_definitions(root)
    if own:
        allowed = trust.allowed(root)
        if allowed != fingerprint(own):
            names = tuple(sorted({name for entries in own.values() for name in _names(entries)}))
            return ServerSet(tuple(found.values()), Withheld(root, tuple(own), names, allowed is not None))
        for server in workspace_servers(root, env):
            found[server.name] = server
    return ServerSet(tuple(found.values()))


def workspace_servers(root: Path, env: Mapping[str, str] | None = None) -> list[ServerConfig]:
    """The servers the workspace itself defines (its .mcp.json, then its teachback.toml), allowed or not."""
    env = os.environ if env is None else env
    return _from_claude(root / CLAUDE_FILE, root, env) + _from_toml(root / CONFIG_FILE, root, env)


def workspace_definitions(root: Path) -> dict[str, Any]:
    """The workspace's own server definitions, by file, as read (what allowing them covers)."""
    own: dict[str, Any] = {}
    claude = root / CLAUDE_FILE
    if claude.is_file():
        try:
            own[CLAUDE_FILE] = claude.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            own[CLAUDE_FILE] = f"(unreadable: {exc.strerror})"
    table = config_table(root / CONFIG_FILE, SERVERS_TABLE) or None
    if table:
        own[CONFIG_FILE] = table
    return own


def fingerprint(own: Mapping[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(json.dumps(own, sort_keys=True, default=str).encode()).hexdigest()


def _names(entries: Any) -> list[str]:
    """Server names in a definition as read (the raw .mcp.json text or a TOML table), leniently."""
    if isinstance(entries, str):
        try:
            entries = json.loads(entries).get("mcpServers")
        except (ValueError, AttributeError):
            return []
    return [str(name) for name in entries] if isinstance(entries, dict) else []


def _from_toml(path: Path, root: Path, env: Mapping[str, str]) -> list[ServerConfig]:
    table = config_table(path, SERVERS_TABLE) or None
    if table is None:
        return []
    if not isinstance(table, dict):
        return [
            _broken("mcp_servers", str(path), f"[{SERVERS_TABLE}] must be a table of [{SERVERS_TABLE}.NAME] tables")
        ]
    return [_server(name, entry, str(path), KEYS, root, env) for name, entry in table.items()]


def _from_claude(path: Path, root: Path, env: Mapping[str, str]) -> list[ServerConfig]:
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return [_broken(CLAUDE_FILE, str(path), f"it is not valid JSON ({exc}); fix the file")]
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        return [_broken(CLAUDE_FILE, str(path), 'it needs an "mcpServers" object of servers by name')]
    return [_claude_server(name, entry, str(path), root, env) for name, entry in servers.items()]


def _claude_server(name: str, entry: Any, source: str, root: Path, env: Mapping[str, str]) -> ServerConfig:
    kind = entry.get("type") if isinstance(entry, dict) else None
    if kind == "sse":
        return _broken(
            name, source, 'the SSE transport ("type": "sse") is not supported; use the server\'s streamable-HTTP URL'
        )
    if kind not in (None, "stdio", "http", "streamable-http"):
        return _broken(name, source, f'"type" must be "stdio" or "http", got {kind!r}')
    return _server(name, entry, source, CLAUDE_KEYS, root, env)


def parse_server(name: str, entry: Any, source: str, root: Path, env: Mapping[str, str] | None = None) -> ServerConfig:
    """One server from a client's own description (an editor's session), in the teachback.toml form."""
    return _server(name, entry, source, KEYS, root, os.environ if env is None else env)


def _server(
    name: str, entry: Any, source: str, keys: Sequence[str], root: Path, env: Mapping[str, str]
) -> ServerConfig:
    if not NAME.match(name):
        return _broken(
            name, source, "its name must be 1-40 letters, digits, '_' or '-' (it becomes part of each tool's name)"
        )
    if not isinstance(entry, dict):
        return _broken(name, source, "it must be a table of settings such as command = ... or url = ...")
    unknown = sorted(set(entry) - set(keys))
    if unknown:
        return _broken(name, source, f"unknown key(s) {', '.join(unknown)}; known: {', '.join(keys)}")
    try:
        values = {
            "command": _text(entry, "command"),
            "args": tuple(_texts(entry, "args")),
            "env": _table(entry, "env"),
            "cwd": _text(entry, "cwd"),
            "url": _text(entry, "url"),
            "headers": _table(entry, "headers"),
            "startup_timeout": _seconds(entry, "startup_timeout"),
            "call_timeout": _seconds(entry, "call_timeout"),
        }
    except ValueError as exc:
        return _broken(name, source, str(exc))
    if bool(values["command"]) == bool(values["url"]):
        return _broken(
            name, source, "give either command (a program spoken to over stdio) or url (a streamable-HTTP endpoint)"
        )
    try:
        values = _expanded(values, env)
    except LookupError as exc:
        return _broken(name, source, str(exc))
    if values["cwd"]:
        values["cwd"] = str((root / values["cwd"]).resolve())
    return ServerConfig(name=name, source=source, **values)


def _broken(name: str, source: str, problem: str) -> ServerConfig:
    return ServerConfig(name=name, source=source, problem=f"its entry cannot be used: {problem}")


def _text(entry: dict[str, Any], key: str) -> str | None:
    value = entry.get(key)
    if value is None or (isinstance(value, str) and value.strip()):
        return value
    raise ValueError(f"{key} must be a non-empty string, got {value!r}")


def _texts(entry: dict[str, Any], key: str) -> list[str]:
    value = entry.get(key, [])
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise ValueError(f"{key} must be a list of strings, got {value!r}")


def _table(entry: dict[str, Any], key: str) -> dict[str, str]:
    value = entry.get(key, {})
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return dict(value)
    raise ValueError(f"{key} must be a table of strings, got {value!r}")


def _seconds(entry: dict[str, Any], key: str) -> float | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise ValueError(f"{key} must be a number of seconds above 0, got {value!r}")
    return float(value)


def _expanded(values: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """`values` with ${VAR} and ${VAR:-default} replaced from `env` (LookupError: one is not set)."""

    def expand(text: str | None, where: str) -> str | None:
        if text is None:
            return None

        def value(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            raise LookupError(
                f"{where} uses ${{{name}}}, which is not set in the environment; set it, or give a default "
                f"as ${{{name}:-value}}"
            )

        return VARIABLE.sub(value, text)

    return {
        **values,
        "command": expand(values["command"], "command"),
        "args": tuple(expand(a, "args") for a in values["args"]),
        "env": {k: expand(v, f"env.{k}") for k, v in values["env"].items()},
        "cwd": expand(values["cwd"], "cwd"),
        "url": expand(values["url"], "url"),
        "headers": {k: expand(v, f"headers.{k}") for k, v in values["headers"].items()},
    }
