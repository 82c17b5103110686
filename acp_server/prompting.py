"""What the editor sends, in the agent's terms: a prompt's content blocks as a UserInput, and the
session's MCP servers in the form teachback.toml gives them (agent.mcp.config reads that form)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from agent.protocol import ContextRef, UserInput


def user_input(blocks: list[Any], root: Path) -> UserInput:
    """Text blocks are the instruction; a file of the workspace the editor links or embeds is a
    context reference (the agent reads it, through the editor when it offers fs/*); an embedded
    text that is no such file is quoted in the instruction."""
    texts: list[str] = []
    refs: list[ContextRef] = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind == "resource_link":
            rel = workspace_path(block.uri, root)
            if rel is not None:
                refs.append(ContextRef(path=rel))
            else:
                texts.append(f"[{block.name}]({block.uri})")
        elif kind == "resource":
            resource = block.resource
            rel = workspace_path(resource.uri, root)
            if rel is not None:
                refs.append(ContextRef(path=rel))
            elif getattr(resource, "text", None) is not None:
                texts.append(f"\n{resource.uri}:\n```\n{resource.text}\n```")
        else:  # image and audio are not offered in initialize; an editor that sends them anyway
            texts.append(f"[a {kind} block was left out: teachback reads text only]")
    return UserInput(text="\n".join(t for t in texts if t).strip(), context=tuple(refs))


def workspace_path(uri: str, root: Path) -> str | None:
    """`uri`'s path relative to `root` when it is a file:// URI (or a plain path) inside it."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("", "file"):
        return None
    path = Path(unquote(parsed.path))
    if not path.is_absolute():
        return None
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


def mcp_entries(servers: list[Any] | None) -> list[dict[str, Any]]:
    """The editor's MCP servers as `{"name", "entry"}`, `entry` as a [mcp_servers.NAME] table holds
    it. Only stdio and HTTP servers: initialize offers no other transport."""
    entries = []
    for server in servers or ():
        data = server.model_dump(by_alias=True, exclude_none=True)
        kind = data.get("type", "stdio")
        if kind == "stdio":
            env = {v["name"]: v["value"] for v in data.get("env", [])}
            entry: dict[str, Any] = {"command": data["command"], "args": list(data.get("args", [])), "env": env}
        elif kind == "http":
            entry = {"url": data["url"], "headers": {h["name"]: h["value"] for h in data.get("headers", [])}}
        else:
            continue
        entries.append({"name": data["name"], "entry": entry})
    return entries
