"""The fitting correction takes the fixing call from the canonical form the export keeps of the
correction (its arguments read once) and comes out as it does when it reads them itself."""

from __future__ import annotations

import json
from pathlib import Path

from agent.protocol import (
    AssistantMessage,
    Event,
    SessionStarted,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
    new_id,
)
from feedback_store import Recorder, open_store
from feedback_store.export.corrections import Workspace, fitting_correction
from feedback_store.export.views import Memo, canonical_message, tool_names

TOOLS = [{"type": "function", "function": {"name": "edit_file", "parameters": {"type": "object"}}}]


def events(sid: str) -> list[Event]:
    out: list[Event] = [
        SessionStarted(
            session_id=sid, workspace="/w", model="openai/gpt", frontend="test", system_prompt="Edit.", tools=TOOLS
        ),
        TurnStarted(session_id=sid, turn=1, text="task", message={"role": "user", "content": "task"}),
    ]
    for step in range(1, 5):
        ok, call_id = step % 2 == 0, f"c{step}"
        args = json.dumps({"path": "app.py", "old_text": f"v = {step}", "new_text": f"v = {step + 1}"})
        result = "Edited app.py." if ok else "old_text was not found in app.py."
        out += [
            AssistantMessage(
                session_id=sid,
                step=step,
                message={
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": call_id, "type": "function", "function": {"name": "edit_file", "arguments": args}}
                    ],
                },
            ),
            ToolCallStarted(session_id=sid, call_id=call_id, name="edit_file", arguments=args, step=step),
            ToolCallFinished(
                session_id=sid,
                call_id=call_id,
                name="edit_file",
                ok=ok,
                result=result,
                step=step,
                error_kind=None if ok else "no_match",
                target="app.py",
                message={"role": "tool", "tool_call_id": call_id, "content": result},
            ),
        ]
    return [*out, TurnFinished(session_id=sid, turn=1, reason="finished", steps=4)]


def test_the_fixing_call_comes_from_the_kept_canonical_form(tmp_path: Path) -> None:
    store = open_store(tmp_path / "f.db")
    Recorder(store).record_many(events(new_id()))
    pairs = store.pairs()
    assert len(pairs) == 2 and all(p.correction is not None for p in pairs)
    memo, asked = Memo(), []

    def canonical(message: dict) -> dict:
        asked.append(message)
        return memo.get(message, lambda m: canonical_message(m, tool_names(TOOLS)))

    for pair in pairs:
        alone = fitting_correction(Workspace(store), pair)
        kept = fitting_correction(Workspace(store), pair, canonical)
        assert kept == alone and kept.message is not None
        assert asked[-1] is pair.correction
        assert kept.message["tool_calls"][0] is canonical(pair.correction)["tool_calls"][0]  # not read again
    store.close()
