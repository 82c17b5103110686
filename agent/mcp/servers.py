"""The MCP servers of one session: started together, in parallel, before its first turn; their tools
offered to the model beside the built-in ones; every way a call can go wrong (a server that did not
start, a timeout, a crash, an error answer) turned into a tool result the model reads.

Nothing here imports the `mcp` library until a session starts its servers (agent.mcp.connection),
so opening a session, and the language server's start, stay fast."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.config import Settings
from agent.mcp.config import ServerConfig, Withheld, load_servers
from agent.mcp.tools import McpTool, result_text
from agent.protocol import MCP_PREFIX
from agent.toolkit import ServedTools, ToolResult, error

if TYPE_CHECKING:
    from agent.mcp.connection import Connection

log = logging.getLogger(__name__)
MAX_RESTARTS = 3  # a server that keeps crashing is restarted this many times in a session, then left down


@dataclass
class _Server:
    config: ServerConfig
    connection: Connection | None = None
    tools: list[McpTool] = field(default_factory=list)
    down: str | None = None  # why it cannot be used (for the model)
    restarts: int = 0


class McpServers:
    """`start()` once (each server within its start-up timeout), `call` through the tools it
    returns, `close()` at the end of the session (agent.toolkit.ToolServers)."""

    def __init__(
        self, configs: Sequence[ServerConfig], settings: Settings, workspace: Path, withheld: Withheld | None = None
    ) -> None:
        self.settings = settings
        self.workspace = workspace
        self.withheld = withheld
        self._servers = {c.name: _Server(c) for c in configs}
        self._started: ServedTools | None = None

    async def start(self) -> ServedTools:
        if self._started is not None:
            return self._started
        servers = list(self._servers.values())
        listings = await asyncio.gather(*(self._start(server) for server in servers))
        taken: set[str] = set()
        tools: list[McpTool] = []
        for server, listed in zip(servers, listings):
            server.tools = [McpTool.from_listing(server.config.name, t, taken, self.call) for t in listed]
            tools.extend(server.tools)
        down = [s for s in self._servers.values() if s.down is not None]
        unavailable = {f"{MCP_PREFIX}{s.config.name}__": _never_started(s.config.name, s.down or "") for s in down}
        notices = [self.withheld.notice()] if self.withheld else []
        notices += [
            f"MCP server {s.config.name} is not available: {s.down}. Its tools are left out of this session; fix "
            f"its entry in {s.config.source}, then check it with `teachback doctor`."
            for s in down
        ]
        self._started = ServedTools(tuple(tools), unavailable, tuple(notices))
        return self._started

    def report(self) -> list[tuple[ServerConfig, str | None, list[McpTool]]]:
        """Each server, why it is down (None: it started), and its tools (after `start`)."""
        return [(s.config, s.down, s.tools) for s in self._servers.values()]

    async def close(self) -> None:
        connections = [s.connection for s in self._servers.values() if s.connection is not None]
        await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)

    async def call(self, tool: McpTool, arguments: dict[str, Any]) -> ToolResult:
        """Run `tool` on its server (restarted first if it crashed); a ToolResult whatever happens."""
        from agent.mcp.connection import CallFailed, StartFailed

        server = self._servers[tool.server]
        connection = server.connection
        if connection is None or server.down is not None:
            return error(self._unavailable_text(tool, server), "unavailable")
        if not connection.alive:
            if server.restarts >= MAX_RESTARTS:
                server.down = f"it crashed {MAX_RESTARTS + 1} times in this session"
                return error(self._unavailable_text(tool, server), "unavailable")
            server.restarts += 1
            try:
                await connection.open(self._startup_timeout(server.config))
            except StartFailed as exc:
                server.down = f"it crashed and did not start again: {exc}"
                return error(self._unavailable_text(tool, server), "unavailable")
        timeout = server.config.call_timeout or self.settings.mcp_call_timeout
        try:
            result = await connection.call(tool.remote_name, arguments, timeout)
        except CallFailed as exc:
            return error(_failure_text(tool, exc.kind, str(exc), timeout), exc.kind)
        text = result_text(result)
        if result.is_error:
            return error(
                f"{tool.name} failed; the MCP server {tool.server} answered:\n{text}\nCheck the arguments against "
                f"{tool.signature_text()} and the tool's description, then send a corrected call, or reach the goal "
                "another way.",
                "failed",
            )
        return ToolResult(text)

    async def _start(self, server: _Server) -> list[Any]:
        """Start `server`; the tools it lists (mcp.types.Tool), none when it is down."""
        from agent.mcp.connection import Connection, StartFailed

        config = server.config
        if config.problem is not None:
            server.down = config.problem
            return []
        server.connection = Connection(config, self.workspace)
        try:
            return await server.connection.open(self._startup_timeout(config))
        except StartFailed as exc:
            server.down = f"`{config.describe()}` could not be started: {exc}"
            log.warning("MCP server %s: %s", config.name, server.down)
            return []

    def _startup_timeout(self, config: ServerConfig) -> float:
        return config.startup_timeout or self.settings.mcp_startup_timeout

    @staticmethod
    def _unavailable_text(tool: McpTool, server: _Server) -> str:
        return (
            f"{tool.name} was not run: its MCP server {tool.server} is not available ({server.down}). Its tools "
            "cannot be used in this session; reach the goal another way, or tell the user the server needs fixing."
        )


def _never_started(server: str, why: str) -> str:
    """What the model reads when it calls a tool of a server that never started."""
    return (
        f"The MCP server {server} is not available, so none of its tools can be used in this session ({why}). "
        "Reach the goal another way, or tell the user the server needs fixing."
    )


def _failure_text(tool: McpTool, kind: str, why: str, timeout: float) -> str:
    if kind == "timeout":
        return (
            f"{tool.name} did not answer within {timeout:g} s ({why}), so teachback stopped waiting; the server may "
            "still finish the work. Ask for less at once, or reach the goal another way."
        )
    if kind == "crashed":
        return (
            f"The MCP server {tool.server} stopped during this {tool.name} call, so it has no result ({why}). "
            "teachback starts it (or connects to it) again at the next call of its tools; if these arguments made "
            "it crash, send different ones."
        )
    if kind == "bad_arguments":
        return (
            f"The MCP server {tool.server} refused the arguments for {tool.name}: {why}\n"
            f"Expected: {tool.signature_text()}\nParameters:\n{tool.parameters_text()}"
        )
    return f"{tool.name} failed on the MCP server {tool.server}: {why}"


def session_servers(workspace: Path, settings: Settings, extra: Sequence[ServerConfig] = ()) -> McpServers | None:
    """The MCP servers a session on `workspace` starts: the configured ones and `extra` (servers a
    client names for its session; of one name, these win), or None when there are none to start or
    to report."""
    found = load_servers(workspace)
    configs = {c.name: c for c in (*found.servers, *extra)}
    if not configs and found.withheld is None:
        return None
    return McpServers(list(configs.values()), settings, Path(workspace).resolve(), found.withheld)
