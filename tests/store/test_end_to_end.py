"""A real session through the scripted model, recorded, turned into pairs and exported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.config import Settings
from agent.protocol import UserInput
from agent.runtime import open_session
from feedback_store import Recorder, open_store
from feedback_store.export.export import FORMATS, export
from tests.conftest import call, turn

pytestmark = pytest.mark.timeout(90)


def three_mistakes(script) -> str:
    return script(
        # 1. an edit whose old_text is not in the file, then the fixed edit
        turn(
            call(
                "edit_file",
                {"path": "app.py", "old_text": "return 'Hi, ' + name", "new_text": "return f'Hello, {name}!'"},
                "c1",
            )
        ),
        turn(
            call(
                "edit_file",
                {"path": "app.py", "old_text": "return 'Hello, ' + name", "new_text": "return f'Hello, {name}!'"},
                "c2",
            )
        ),
        # 2. an unknown tool, then a valid call
        turn(call("open_file", {"path": "util.py"}, "c3")),
        turn(call("read_file", {"path": "util.py"}, "c4")),
        # 3. an edit that breaks the syntax, then the repair
        turn(call("edit_file", {"path": "util.py", "old_text": "def add(a, b):", "new_text": "def add(a, b)"}, "c5")),
        turn(
            call("edit_file", {"path": "util.py", "old_text": "def add(a, b)\n", "new_text": "def add(a, b):\n"}, "c6")
        ),
        turn(call("finish", {"summary": "done"}, "c7")),
    )


async def run_session(git_repo: Path, model: str, db: Path) -> str:
    store = open_store(db)
    settings = Settings(model=model, approval="full-auto", repo_map_tokens=0)
    session = open_session(git_repo, settings, frontend="test")
    session.subscribe(Recorder(store))
    finished = await session.run(UserInput(text="Make greet use an f-string and tidy util.py"))
    assert finished.reason == "finished"
    if hasattr(session, "close"):
        await session.close()
    store.close()
    return session.id


async def test_three_failures_become_three_pairs(git_repo: Path, script, tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    session_id = await run_session(git_repo, three_mistakes(script), db)
    store = open_store(db)
    pairs = {p.source: p for p in store.pairs()}
    assert sorted(p.source for p in store.pairs()) == ["lint", "schema", "tool"]

    tool = pairs["tool"]
    assert tool.tool == "edit_file" and tool.error_kind == "no_match" and tool.target == "app.py"
    assert tool.completion["tool_calls"][0]["id"] == "c1"
    assert tool.correction["tool_calls"][0]["id"] == "c2"
    assert tool.feedback and "Hi, " not in tool.prompt[-1].get("content", "")

    schema = pairs["schema"]
    assert schema.error_kind == "unknown_tool"
    assert schema.completion["tool_calls"][0]["function"]["name"] == "open_file"
    assert schema.correction["tool_calls"][0]["id"] == "c4"
    assert "read_file" in schema.feedback  # the list of available tools

    lint = pairs["lint"]
    assert lint.target == "util.py" and lint.error_kind == "syntax_error"
    assert lint.completion["tool_calls"][0]["id"] == "c5"
    assert lint.correction["tool_calls"][0]["id"] == "c6"
    assert "no longer parses" in lint.feedback

    for pair in pairs.values():
        assert pair.prompt[0]["role"] == "system"
        assert pair.session_id == session_id
        assert pair.model.startswith("scripted/")
        assert pair.tools and pair.tools[0]["type"] == "function"
        assert not any(pair.feedback in (m.get("content") or "") for m in pair.prompt)

    conversation = store.conversation(session_id)
    assert conversation[0]["role"] == "system" and conversation[1]["role"] == "user"
    assert [m["role"] for m in conversation].count("assistant") == 7
    sessions = store.list_sessions()
    assert sessions[0].id == session_id and sessions[0].turns == 1 and sessions[0].pairs == 3
    assert sessions[0].title.startswith("Make greet")


async def test_every_format_from_a_real_session(git_repo: Path, script, tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    await run_session(git_repo, three_mistakes(script), db)
    records = {}
    for fmt in sorted(FORMATS):
        if fmt == "verl":
            continue
        out = tmp_path / f"{fmt}.jsonl"
        result = export([db], fmt, out)
        # The lint fix only undid the broken edit: no net change, so no correction fits its prompt.
        fitting = 2
        assert result.records == {"kto": 3 + fitting, "sdpo": 3, "trl-sdpo": 3}.get(fmt, fitting)
        assert fmt in ("sdpo", "trl-sdpo", "kto") or result.left_out.get("no net change") == 1
        records[fmt] = [json.loads(line) for line in out.read_text().splitlines()]
        assert all(r["format"] == FORMATS[fmt].name for r in records[fmt])
    sdpo = {r["source"]: r for r in records["sdpo"]}
    assert set(sdpo) == {"schema", "tool", "lint"}
    for record in sdpo.values():
        feedback = record["feedback"]
        assert feedback in record["teacher_prompt"][-1]["content"]
        assert not any(feedback in (m.get("content") or "") for m in record["prompt"])
        assert record["teacher_prompt"][: len(record["prompt"])] == record["prompt"]
        assert record["completion"]["role"] == "assistant" and record["correction"]["role"] == "assistant"
        assert record["tools"]
    assert {"prompt", "privileged_context", "format"} <= set(records["trl-sdpo"][0])
    assert {"prompt", "privileged_context", "format"} <= set(records["trl-sdft"][0])
    assert {"prompt", "chosen", "rejected"} <= set(records["dpo"][0])
    sft = records["sft"][0]
    assert sft["completion"][-1]["role"] == "assistant" and json.loads(sft["tools"])
