"""Approval of MCP tool calls: asked about by default in ask and auto-edit, refused in read-only
unless an allow_tools rule names the tool, run in full-auto unless a deny_tools rule names it."""

from __future__ import annotations

import pytest

from agent.approval import ApprovalPolicy
from agent.protocol import ApprovalRequested, ToolCallFinished
from tests.conftest import call, turn
from tests.mcp.conftest import finished, run_session

DIVIDE = call("mcp__probe__divide", {"a": 9, "b": 3})
PICTURE = call("mcp__probe__picture", {})


@pytest.mark.parametrize(
    ("mode", "rules", "expected"),
    [
        ("ask", {}, "ask"),
        ("auto-edit", {}, "ask"),
        ("full-auto", {}, "allow"),
        ("read-only", {}, "deny"),
        ("read-only", {"allow_tools": ("mcp__probe__*",)}, "allow"),
        ("ask", {"allow_tools": ("mcp__probe__divide",)}, "allow"),
        ("full-auto", {"deny_tools": ("mcp__probe__*",)}, "deny"),
        ("full-auto", {"ask_tools": ("mcp__*__divide",)}, "ask"),
        ("ask", {"allow_tools": ("mcp__probe__*",), "deny_tools": ("mcp__probe__divide",)}, "deny"),
        ("full-auto", {"deny": ("*",)}, "allow"),  # command rules are not tool rules
    ],
)
def test_tool_rules_and_modes(mode, rules, expected):
    assert ApprovalPolicy(mode=mode, **rules).decide("call", tool="mcp__probe__divide") == expected


async def test_ask_mode_asks_before_an_mcp_call_and_a_refusal_is_a_denied_call(tmp_path, user_servers, script):
    user_servers(time=False)
    asked: list[ApprovalRequested] = []

    def answer(request: ApprovalRequested):
        asked.append(request)
        return (len(asked) > 1, None if len(asked) > 1 else "not that one")

    model = script(turn(DIVIDE), turn(PICTURE), turn(content="done"))
    _, events = await run_session(tmp_path, model, approval="ask", answer=answer)
    assert [(r.action, r.summary) for r in asked] == [
        ("call", 'mcp__probe__divide {"a": 9, "b": 3}'),
        ("call", "mcp__probe__picture {}"),
    ]
    assert '"a": 9' in asked[0].detail and '"b": 3' in asked[0].detail
    assert finished(events) == [("mcp__probe__divide", "denied"), ("mcp__probe__picture", None)]
    refused = next(e for e in events if isinstance(e, ToolCallFinished))
    assert "The user declined this call" in refused.result and "not that one" in refused.result


async def test_auto_edit_asks_too(tmp_path, user_servers, script):
    user_servers(time=False)
    asked = []
    _, events = await run_session(
        tmp_path, script(turn(DIVIDE)), approval="auto-edit", answer=lambda r: (asked.append(r) or True, None)
    )
    assert len(asked) == 1 and finished(events) == [("mcp__probe__divide", None)]


async def test_read_only_refuses_mcp_tools_but_what_a_rule_allows(tmp_path, user_servers, script):
    user_servers(time=False)
    model = script(turn(DIVIDE), turn(PICTURE), turn(content="done"))
    _, events = await run_session(tmp_path, model, approval="read-only", allow_tools=("mcp__probe__div*",))
    assert finished(events) == [("mcp__probe__divide", None), ("mcp__probe__picture", "denied")]
    refused = [e for e in events if isinstance(e, ToolCallFinished)][1]
    assert "read-only" in refused.result and "allow_tools" in refused.result
    assert not [e for e in events if isinstance(e, ApprovalRequested)]


async def test_a_deny_rule_keeps_a_tool_from_running_in_full_auto(tmp_path, user_servers, script):
    user_servers(time=False)
    model = script(turn(call("mcp__probe__crash", {"when": "now"})), turn(DIVIDE), turn(content="done"))
    _, events = await run_session(tmp_path, model, deny_tools=("mcp__probe__crash",))
    # The server did not crash: the call was refused before it was sent, and the next one runs.
    assert finished(events) == [("mcp__probe__crash", "denied"), ("mcp__probe__divide", None)]
    refused = next(e for e in events if isinstance(e, ToolCallFinished))
    assert "deny_tools" in refused.result
