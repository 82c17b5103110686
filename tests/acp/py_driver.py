"""An editor on the ACP Python library's client: runs a plan against `teachback acp` and returns what
it saw (the same plan and transcript as driver.mjs, the TypeScript library's client).

Plan: `command` (argv), `env`, `cwd`, `load` (a session id, or null for session/new), `prompts`,
`answers` (option ids for the permission requests, in order), `buffers` (path -> unsaved text the
editor serves on fs/read_text_file), `fs` (offer fs/*), a prompt may be {"setMode": id} instead (a
session/set_mode between turns), `cancelAfterToolCalls` (send session/cancel
once that many tool calls have started), `mcpServers` (the session's, as ACP writes them), `stderr`
(a file for the agent's log).
Transcript: `initialize`, `initializeMs`, `sessionId`, `newSession`, `loadUpdates`, `modeUpdates` (those
sent while a mode was set), `turns` ([{updates,
stopReason, firstUpdateMs, ms}]), `permissions` ([{toolCall, options, chose}]), `reads`, `writes`.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    FileSystemCapabilities,
    Implementation,
    McpServerStdio,
    ReadTextFileResponse,
    RequestPermissionResponse,
    WriteTextFileResponse,
)


def _plain(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class Editor:
    """The client side: records updates, answers permissions, serves its buffers and writes."""

    def __init__(self, plan: dict[str, Any], transcript: dict[str, Any]) -> None:
        self.plan = plan
        self.transcript = transcript
        self.answers = list(plan.get("answers", []))
        self.buffers = dict(plan.get("buffers", {}))
        self.sink: list[dict[str, Any]] = transcript["loadUpdates"]
        self.on_tool_call: Any = None
        self.first_update: float | None = None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if self.first_update is None:
            self.first_update = time.perf_counter()
        data = _plain(update)
        self.sink.append(data)
        if data["sessionUpdate"] == "tool_call" and self.on_tool_call is not None:
            self.on_tool_call()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> RequestPermissionResponse:
        chose = self.answers.pop(0) if self.answers else "reject_once"
        self.transcript["permissions"].append(
            {"toolCall": _plain(tool_call), "options": [_plain(o) for o in options], "chose": chose}
        )
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=chose))

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> ReadTextFileResponse:
        self.transcript["reads"].append(path)
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        try:
            return ReadTextFileResponse(content=Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise RequestError.resource_not_found(path) from exc

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        self.transcript["writes"].append(path)
        Path(path).write_text(content, encoding="utf-8")  # the buffer, saved, as an editor does
        self.buffers.pop(path, None)
        return WriteTextFileResponse()


async def run_plan(plan: dict[str, Any]) -> dict[str, Any]:
    transcript: dict[str, Any] = {
        "loadUpdates": [],
        "turns": [],
        "permissions": [],
        "reads": [],
        "writes": [],
        "modeUpdates": [],
    }
    editor = Editor(plan, transcript)
    with open(plan["stderr"], "ab") as stderr:
        spawned = spawn_agent_process(
            editor,
            *plan["command"],
            env=plan["env"],
            cwd=plan["cwd"],
            transport_kwargs={"stderr": stderr, "shutdown_timeout": 30.0},
        )
        async with spawned as (conn, _process):
            started = time.perf_counter()
            fs = FileSystemCapabilities(read_text_file=plan["fs"], write_text_file=plan["fs"])
            init = await conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(fs=fs),
                client_info=Implementation(name="pytest-acp", version="1"),
            )
            transcript["initializeMs"] = (time.perf_counter() - started) * 1000
            transcript["initialize"] = _plain(init)
            if plan.get("load"):
                await conn.load_session(cwd=plan["cwd"], session_id=plan["load"], mcp_servers=[])
                session_id = plan["load"]
            else:
                servers = [McpServerStdio.model_validate(s) for s in plan.get("mcpServers", [])]
                created = await conn.new_session(cwd=plan["cwd"], mcp_servers=servers)
                transcript["newSession"], session_id = _plain(created), created.session_id
            transcript["sessionId"] = session_id
            for text in plan["prompts"]:
                if isinstance(text, dict):  # the editor's mode picker, between turns
                    editor.sink = transcript["modeUpdates"]
                    await conn.set_session_mode(session_id=session_id, mode_id=text["setMode"])
                    continue
                transcript["turns"].append(await _turn(conn, editor, session_id, text))
    return transcript


async def _turn(conn: Any, editor: Editor, session_id: str, text: str) -> dict[str, Any]:
    turn: dict[str, Any] = {"updates": []}
    editor.sink, editor.first_update = turn["updates"], None
    limit = editor.plan.get("cancelAfterToolCalls")
    seen = 0

    def on_tool_call() -> None:
        nonlocal seen
        seen += 1
        if limit is not None and seen == limit:
            asyncio.ensure_future(conn.cancel(session_id=session_id))

    editor.on_tool_call = on_tool_call
    started = time.perf_counter()
    response = await conn.prompt(session_id=session_id, prompt=[text_block(text)])
    turn["ms"] = (time.perf_counter() - started) * 1000
    turn["firstUpdateMs"] = (editor.first_update - started) * 1000 if editor.first_update else None
    turn["stopReason"] = response.stop_reason
    return turn


def run(plan: dict[str, Any]) -> dict[str, Any]:
    return asyncio.run(run_plan(plan))
