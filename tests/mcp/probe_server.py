"""An MCP server written with the official library, for the MCP tests: run as
`python probe_server.py [--http PORT]`. Its tools fail in each way a server tool can: an error
answer on some inputs, an answer too slow to wait for, the process dying mid-call. With
PROBE_MARKER set, it writes that file when it starts (to tell whether it was started at all)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent, TextContent

server = MCPServer("probe")


@server.tool()
def divide(a: int, b: int) -> str:
    """Divide a by b and give the quotient."""
    if b == 0:
        raise ToolError("b must not be zero: division by zero is undefined")
    return f"{a} / {b} = {a / b:g}"


@server.tool()
async def slow(seconds: float) -> str:
    """Wait that many seconds, then answer."""
    await asyncio.sleep(seconds)
    return f"waited {seconds:g} s"


@server.tool()
def crash(when: str) -> str:
    """End the server's process at once when `when` starts with "now"; otherwise answer."""
    if when.startswith("now"):
        print("probe: exiting mid-call as asked", file=sys.stderr, flush=True)
        os._exit(3)
    return f"still running ({when})"


@server.tool()
def picture() -> list[ImageContent | TextContent]:
    """A small image and a caption."""
    return [
        ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
        TextContent(type="text", text="a one-pixel test image"),
    ]


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of one header of the HTTP request that carried this call."""
    headers = ctx.headers or {}
    return headers.get(name.lower(), f"no header {name}")


if __name__ == "__main__":
    marker = os.environ.get("PROBE_MARKER")
    if marker:
        Path(marker).write_text(f"{os.getpid()}\n")
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
