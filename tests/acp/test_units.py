"""The ACP agent's pure parts: events as updates, prompts as instructions, the editor's MCP servers,
the rules "always" answers make, and what `initialize` imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import get_args

from acp import resource_link_block, text_block
from acp.schema import EnvVariable, HttpHeader, HttpMcpServer, McpServerStdio, SseMcpServer

from acp_server.prompting import mcp_entries, user_input
from acp_server.session import rule_for
from acp_server.updates import STOP_REASONS, Translator
from agent.protocol import ApprovalRequested, FinishReason, ModelUsage, ToolCallFinished, ToolCallStarted
from agent.toolkit import Toolbox, ToolResult, tool


def _plain(updates):
    return [u.model_dump(mode="json", by_alias=True, exclude_none=True) for u in updates]


def test_every_way_a_turn_ends_has_a_stop_reason_but_an_error() -> None:
    assert set(STOP_REASONS) == set(get_args(FinishReason)) - {"error"}
    assert STOP_REASONS["interrupted"] == "cancelled" and STOP_REASONS["max_steps"] == "max_turn_requests"


def test_usage_is_said_against_a_known_context_window_only(tmp_path: Path) -> None:
    usage = ModelUsage(
        session_id="s", model="m", step=1, prompt_tokens=900, completion_tokens=100, cost_usd=0.25, latency_ms=1.0
    )
    assert Translator(tmp_path).updates(usage) == []
    known = Translator(tmp_path, context_size=200_000)
    known.updates(usage)
    [update] = _plain(known.updates(usage))
    assert update == {
        "sessionUpdate": "usage_update",
        "used": 1000,
        "size": 200_000,
        "cost": {"amount": 0.5, "currency": "USD"},
    }


def test_a_tool_call_has_its_kind_title_locations_and_a_failed_status(tmp_path: Path) -> None:
    translator = Translator(tmp_path)
    args = '{"src": "a.py", "dst": "b/a.py"}'
    [started] = _plain(
        translator.updates(ToolCallStarted(session_id="s", call_id="m1", name="move_file", arguments=args, step=1))
    )
    assert started["kind"] == "move" and started["title"] == "Move a.py to b/a.py"
    assert started["locations"] == [{"path": str(tmp_path / "a.py")}, {"path": str(tmp_path / "b/a.py")}]
    finished = ToolCallFinished(
        session_id="s", call_id="m1", name="move_file", ok=False, result="a.py does not exist.", step=1,
        error_kind="not_found", target="a.py",
    )  # fmt: skip
    [done] = _plain(translator.updates(finished))
    assert done["status"] == "failed" and "a.py does not exist." in done["content"][0]["content"]["text"]
    mcp = ToolCallStarted(session_id="s", call_id="x", name="mcp__github__list_issues", arguments="{}", step=2)
    assert _plain(translator.updates(mcp))[0]["title"] == "github: list_issues"


def test_finish_is_said_as_the_turns_summary_not_shown_as_a_call(tmp_path: Path) -> None:
    translator = Translator(tmp_path)
    call = ToolCallStarted(session_id="s", call_id="f", name="finish", arguments='{"summary": "All done."}', step=3)
    assert translator.updates(call) == []


def test_a_prompt_names_workspace_files_as_context(tmp_path: Path) -> None:
    inside = tmp_path / "pkg" / "mod.py"
    op = user_input(
        [
            text_block("explain this"),
            resource_link_block("mod.py", inside.as_uri()),
            resource_link_block("docs", "https://example.com/docs"),
        ],
        tmp_path,
    )
    assert op.text == "explain this\n[docs](https://example.com/docs)"
    assert [ref.path for ref in op.context] == ["pkg/mod.py"]


def test_the_editors_mcp_servers_take_the_teachback_toml_form() -> None:
    servers = [
        McpServerStdio(name="files", command="mcp-files", args=["--root", "."], env=[EnvVariable(name="K", value="v")]),
        HttpMcpServer(
            type="http", name="web", url="https://mcp.example/mcp", headers=[HttpHeader(name="A", value="b")]
        ),
        SseMcpServer(type="sse", name="old", url="https://mcp.example/sse", headers=[]),
    ]
    assert mcp_entries(servers) == [
        {"name": "files", "entry": {"command": "mcp-files", "args": ["--root", "."], "env": {"K": "v"}}},
        {"name": "web", "entry": {"url": "https://mcp.example/mcp", "headers": {"A": "b"}}},
    ]


def test_an_always_answer_makes_a_rule_of_what_was_asked() -> None:
    def asked(action: str, summary: str, detail: str) -> ApprovalRequested:
        return ApprovalRequested(
            session_id="s", request_id="r", call_id="c", action=action, summary=summary, detail=detail
        )

    assert rule_for(asked("edit", "modify a.py", "diff")) == ("edit", "*", "every edit")
    assert rule_for(asked("command", "Run `make`", "make")) == ("command", "make", "the command `make`")
    assert rule_for(asked("call", "Call mcp__gh__x", "{}"))[:2] == ("call", "mcp__gh__x")


def test_initialize_imports_neither_litellm_nor_the_store() -> None:
    code = (
        "import asyncio, sys\n"
        "from acp_server.server import TeachbackAgent\n"
        "async def main():\n"
        "    agent = TeachbackAgent()\n"
        "    answer = await agent.initialize(protocol_version=1)\n"
        "    loaded = [m for m in ('litellm', 'feedback_store.store', 'agent.runtime') if m in sys.modules]\n"
        "    await agent.close()\n"
        "    print(answer.agent_capabilities.load_session, loaded)\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True []"


# A tool the door has never heard of: what it declares is all the door goes by.
@tool("read", target="path", reads=("path",), kind="read", title=lambda a: f"Count lines in {a.get('path')}", line="at")
def count_lines(ctx: object, path: str, at: int | None = None) -> ToolResult:
    """Count a file's lines.

    Args:
        path: File path relative to the workspace root.
        at: The line to start counting at.
    """
    return ToolResult("0")


def test_a_new_tool_reaches_the_acp_door_by_what_it_declares(tmp_path: Path) -> None:
    args = {"path": "src/a.py", "at": 7}
    started = ToolCallStarted(
        session_id="s",
        call_id="c1",
        name="count_lines",
        arguments='{"path": "src/a.py", "at": 7}',
        step=1,
        roles=count_lines.roles.to_dict(),
        shown=Toolbox([count_lines]).shown("count_lines", args),
    )
    [update] = Translator(tmp_path).updates(started)
    assert (update.title, update.kind) == ("Count lines in src/a.py", "read")
    assert [(loc.path, loc.line) for loc in update.locations] == [(str(tmp_path / "src/a.py"), 7)]
