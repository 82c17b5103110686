"""`teachback acp` driven as an editor drives it, once by the ACP TypeScript library's client and once
by the Python library's: initialize, sessions, streamed tool calls, permissions, cancel and load."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from feedback_store import open_store
from tests.acp.conftest import of_kind, said

MCP_PROBE = Path(__file__).resolve().parents[1] / "mcp" / "probe_server.py"
UTIL_BUFFER_EXTRA = "\n\ndef mul(a, b):\n    return a * b\n"  # in the editor's buffer only, unsaved


def _store():
    return open_store(Path(os.environ["TEACHBACK_HOME"]) / "feedback.db")


def _position(updates: list[dict[str, Any]], call_id: str, kind: str, status: str | None = None) -> int:
    return next(
        i
        for i, u in enumerate(updates)
        if u["sessionUpdate"] == kind and u["toolCallId"] == call_id and (status is None or u.get("status") == status)
    )


def test_initialize_says_what_the_agent_offers(drive) -> None:
    seen = drive("resume.json", [])
    init = seen["initialize"]
    assert init["protocolVersion"] == 1
    assert init["agentInfo"]["name"] == "teachback"
    assert init["agentCapabilities"]["loadSession"] is True
    prompts = init["agentCapabilities"]["promptCapabilities"]
    assert prompts["embeddedContext"] is True and prompts["image"] is False
    assert seen["sessionId"] and seen["turns"] == []
    assert seen["initializeMs"] < 5000  # process start included, on a loaded machine (bench: the figure)


def test_a_prompt_streams_its_tool_calls_in_order(drive, git_repo: Path) -> None:
    util = git_repo / "util.py"
    disk = util.read_text()
    buffer = disk + UTIL_BUFFER_EXTRA
    seen = drive("read_edit_run.json", ["name the product"], buffers={str(util): buffer})
    turn = seen["turns"][0]
    updates = turn["updates"]
    assert turn["stopReason"] == "end_turn"
    calls = of_kind(updates, "tool_call")
    assert [(c["toolCallId"], c["kind"]) for c in calls] == [("t1:r1", "read"), ("t1:e1", "edit"), ("t1:c1", "execute")]
    assert calls[0]["locations"] == [{"path": str(git_repo / "app.py")}]
    assert calls[0]["title"] == "Read app.py" and calls[0]["status"] == "in_progress"
    # each call starts, then ends, before the next one starts
    order = [
        _position(updates, "t1:r1", "tool_call"),
        _position(updates, "t1:r1", "tool_call_update", "completed"),
        _position(updates, "t1:e1", "tool_call"),
        _position(updates, "t1:e1", "tool_call_update", "completed"),
        _position(updates, "t1:c1", "tool_call"),
        _position(updates, "t1:c1", "tool_call_update", "completed"),
    ]
    assert order == sorted(order)
    # the edit's diff: made on the editor's unsaved buffer, which reached the model through fs/read_text_file
    done = updates[order[3]]
    diff = next(c for c in done["content"] if c["type"] == "diff")
    assert diff["path"] == str(util)
    assert diff["oldText"] == buffer
    assert diff["newText"] == buffer.replace("return a * b", "return a * b  # product")
    assert str(util) in seen["reads"] and str(util) in seen["writes"]  # read and written by the editor
    assert util.read_text() == diff["newText"]
    # the command saw the edit on disk
    assert "1" in updates[order[5]]["content"][-1]["content"]["text"]
    assert said(updates).endswith("Done: util.py names its product.")


def test_a_permission_allowed_changes_the_file_and_one_rejected_is_a_user_pair(drive, git_repo: Path) -> None:
    app, util = git_repo / "app.py", git_repo / "util.py"
    before = util.read_text()
    seen = drive("two_edits.json", ["two edits"], approval="ask", answers=["allow_once", "reject_once"])
    asked = seen["permissions"]
    assert [p["toolCall"]["toolCallId"] for p in asked] == ["t1:e1", "t1:e2"]
    assert [o["kind"] for o in asked[0]["options"]] == ["allow_once", "allow_always", "reject_once", "reject_always"]
    assert asked[0]["toolCall"]["status"] == "pending" and asked[0]["toolCall"]["kind"] == "edit"
    assert "+    return f'Hello, {name}!'" in asked[0]["toolCall"]["content"][0]["content"]["text"]
    assert "return f'Hello, {name}!'" in app.read_text()
    assert util.read_text() == before
    updates = seen["turns"][0]["updates"]
    assert updates[_position(updates, "t1:e2", "tool_call_update", "failed")]["status"] == "failed"
    with _store() as store:
        pairs = store.pairs(source="user", session_id=seen["sessionId"])
    assert [(p.tool, p.error_kind, p.target) for p in pairs] == [("edit_file", "denied", "util.py")]


def test_always_answers_become_rules_for_the_session(drive, git_repo: Path) -> None:
    seen = drive("rules.json", ["edit twice"], approval="ask", answers=["allow_always", "reject_always"])
    assert [p["toolCall"]["toolCallId"] for p in seen["permissions"]] == ["t1:e1", "t1:c1"]  # asked once each
    assert "return b - a" in (git_repo / "util.py").read_text()  # the second edit, allowed by the rule
    assert not (git_repo / "ran.txt").exists()  # the command, refused twice
    with _store() as store:
        rows = store.query(
            "SELECT call_id, approved, comment FROM approvals WHERE session_id = ? ORDER BY requested_at",
            (seen["sessionId"],),
        )
    assert [(r["call_id"], r["approved"]) for r in rows] == [("e1", 1), ("c1", 0), ("e2", 1), ("c2", 0)]
    assert rows[0]["comment"] == "allowed for the rest of this session: every edit"
    assert rows[2]["comment"] == "allowed by this session's rule for every edit"
    assert rows[3]["comment"] == "rejected by this session's rule for the command `touch ran.txt`"


def test_cancel_stops_the_turn_at_its_next_step(drive) -> None:
    seen = drive("slow_reads.json", ["read slowly"], cancelAfterToolCalls=2)
    turn = seen["turns"][0]
    assert turn["stopReason"] == "cancelled"
    assert 2 <= len(of_kind(turn["updates"], "tool_call")) <= 4  # of 20 scripted
    assert turn["ms"] < 60_000


def test_load_replays_a_recorded_session_and_goes_on(drive, git_repo: Path) -> None:
    first = drive("resume.json", ["exclaim the greeting"])
    assert first["turns"][0]["stopReason"] == "end_turn"
    seen = drive("resume.json", ["and now?"], load=first["sessionId"])
    replayed = seen["loadUpdates"]
    assert seen["sessionId"] == first["sessionId"]
    assert of_kind(replayed, "user_message_chunk")[0]["content"]["text"] == "exclaim the greeting"
    assert [c["kind"] for c in of_kind(replayed, "tool_call")] == ["read", "edit"]
    edited = of_kind(replayed, "tool_call_update")[-1]
    assert edited["status"] == "completed"
    assert any(c["type"] == "diff" and c["path"] == str(git_repo / "app.py") for c in edited["content"])
    assert "First answer: the greeting is exclaimed." in said(replayed)
    # the conversation came back: the scripted model answers with its fourth turn
    assert said(seen["turns"][0]["updates"]) == "Second answer, after the load."


def test_a_cut_reply_and_a_refusal_end_with_their_stop_reasons(drive) -> None:
    cut = drive("cut.json", ["answer at length"])["turns"][0]
    assert cut["stopReason"] == "max_tokens"
    assert "token limit" in said(cut["updates"])
    refused = drive("refused.json", ["do something refused"])["turns"][0]
    assert refused["stopReason"] == "refusal"
    assert said(refused["updates"]) == "I cannot help with that."


def test_the_sessions_mcp_servers_serve_the_model(drive) -> None:
    probe = {"name": "probe", "command": sys.executable, "args": [str(MCP_PROBE)], "env": []}
    seen = drive("mcp.json", ["divide"], mcpServers=[probe])
    updates = seen["turns"][0]["updates"]
    [started] = of_kind(updates, "tool_call")
    assert (started["title"], started["kind"]) == ("probe: divide", "other")
    done = updates[_position(updates, started["toolCallId"], "tool_call_update", "completed")]
    assert "6 / 3 = 2" in done["content"][-1]["content"]["text"]
