"""`teachback doctor`'s lines about MCP servers: each configured server started (as a session
would), its tools listed, then stopped; a workspace's servers not yet allowed, with what they run."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent.config import Settings
from agent.mcp.config import workspace_servers
from agent.mcp.servers import session_servers

Check = tuple[str, bool, str]
MAX_NAMES = 12


def server_checks(workspace: Path, settings: Settings) -> list[Check]:
    servers = session_servers(workspace, settings)
    if servers is None:
        return [("mcp servers", True, "none configured")]
    checks = asyncio.run(_start_and_stop(servers))
    if servers.withheld is not None:
        checks.append(("mcp servers of this workspace", True, f"not started: {servers.withheld.notice()}"))
        for config in workspace_servers(Path(workspace).resolve()):
            would = config.describe() or config.problem
            checks.append((f"mcp server {config.name}", True, f"not allowed yet; would run {would} [{config.source}]"))
    return checks


async def _start_and_stop(servers) -> list[Check]:
    try:
        await servers.start()
    finally:
        await servers.close()
    checks = []
    for config, down, tools in servers.report():
        name = f"mcp server {config.name}"
        if down is not None:
            checks.append((name, False, f"{down} [{config.source}]"))
            continue
        names = ", ".join(t.name for t in tools[:MAX_NAMES]) + (" ..." if len(tools) > MAX_NAMES else "")
        checks.append((name, True, f"{config.describe()} started; {len(tools)} tool(s): {names or 'none'}"))
    return checks
