"""Plan mode through an editor's agent panel, with the official ACP TypeScript client and the Python
one: the modes advertised and set, the refused calls, the plan as `plan` updates, a plan sent back by
the next prompt (a `user` pair), and the approved plan implemented in the same session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from acp import RequestError

from acp_server.session import AcpSession, ClientOffers
from acp_server.updates import plan_entries
from agent.config import Settings
from feedback_store import open_store
from tests.acp.conftest import of_kind, said


def test_a_plan_is_refused_nothing_sent_back_with_a_reason_then_approved_and_implemented(drive, git_repo: Path) -> None:
    seen = drive(
        "plan_mode.json",
        [{"setMode": "plan"}, "change the greeting", "say Howdy instead"],
        answers=["plan", "auto-edit"],  # keep planning, then approve: edits go on without asking
    )
    modes = seen["newSession"]["modes"]
    assert modes["currentModeId"] == "full-auto"
    assert [m["id"] for m in modes["availableModes"]] == ["read-only", "plan", "ask", "auto-edit", "full-auto"]
    assert of_kind(seen["modeUpdates"], "current_mode_update") == [
        {"sessionUpdate": "current_mode_update", "currentModeId": "plan"}
    ]

    first, second = seen["turns"]
    assert first["stopReason"] == second["stopReason"] == "end_turn"
    failed = [u["toolCallId"] for u in of_kind(first["updates"], "tool_call_update") if u.get("status") == "failed"]
    assert failed == ["t1:e1", "t1:c1", "t1:d1"]
    [plan] = of_kind(first["updates"], "plan")
    assert [e["content"] for e in plan["entries"]] == ["Change the greeting in app.py to Hi.", "Leave old.txt alone."]
    assert all(e["status"] == "pending" for e in plan["entries"])

    asked = seen["permissions"]
    assert [(p["toolCall"]["kind"], p["chose"]) for p in asked] == [
        ("switch_mode", "plan"),
        ("switch_mode", "auto-edit"),
    ]
    assert [o["optionId"] for o in asked[0]["options"]] == ["auto-edit", "ask", "plan"]
    [revised] = of_kind(second["updates"], "plan")
    assert [e["content"] for e in revised["entries"]] == ["Change the greeting in app.py to Howdy."]
    assert {"sessionUpdate": "current_mode_update", "currentModeId": "auto-edit"} in second["updates"]
    assert "The greeting says Howdy." in said(second["updates"])
    # the refused edit to Hi never landed: the approved one found "Hello" to replace
    assert (git_repo / "app.py").read_text() == "def greet(name):\n    return 'Howdy, ' + name\n"
    assert (git_repo / "old.txt").exists() and not (git_repo / "ran.txt").exists()

    with open_store(Path(os.environ["TEACHBACK_HOME"]) / "feedback.db") as store:
        pairs = store.pairs(session_id=seen["sessionId"])
    refused = sorted(p.tool for p in pairs if p.error_kind == "denied")
    assert refused == ["delete_file", "edit_file", "run_command"]
    [sent_back] = [p for p in pairs if p.source == "user"]
    assert sent_back.error_kind == "plan_sent_back" and "say Howdy instead" in sent_back.feedback
    assert sent_back.completion["content"].startswith("1. Change the greeting in app.py to Hi.")
    assert sent_back.correction["content"] == "1. Change the greeting in app.py to Howdy."


async def test_an_unknown_mode_is_a_clear_error_and_a_plan_reads_as_its_steps(tmp_path: Path) -> None:
    session = AcpSession(None, "s1", tmp_path, Settings(), ClientOffers(), [])
    with pytest.raises(RequestError) as refused:
        await session.set_mode("yolo")  # refused before any agent process starts
    assert "unknown mode 'yolo'" in str(refused.value.data) and "plan" in str(refused.value.data)
    await session.close()
    steps = plan_entries("Intro.\n1. Read app.py\n2) Edit it\n- Run the tests\nDone.")
    assert [e.content for e in steps] == ["Read app.py", "Edit it", "Run the tests"]
    assert [e.content for e in plan_entries("  Just change the greeting.  ")] == ["Just change the greeting."]
