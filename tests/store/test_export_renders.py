"""What the model saw is recorded once by hash and read back whole; older databases migrate."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import sqlite_utils

from agent.protocol import AssistantMessage, ModelUsage
from feedback_store import Recorder, open_store
from feedback_store.content.renders import TOKEN_CHUNK, Renders
from feedback_store.migrations import MIGRATIONS, m001_initial_schema
from tests.store.events import FakeSession

SYSTEM = {"role": "system", "content": "You are an agent.\n\n## read_file\nRead a file."}


def local_turns(session: FakeSession, steps: int) -> list[list[int]]:
    """Model calls as the embedded model makes them: each prompt extends the last one."""
    prompts, messages, ids = [], [SYSTEM, {"role": "user", "content": "go"}], list(range(1, 1200))
    for step in range(steps):
        reply = f'{{"name": "read_file", "arguments": {{"path": "f{step}.py"}}}}'
        said = AssistantMessage(session_id=session.id, step=step, message={"role": "assistant", "content": reply})
        prompts.append(list(ids))
        session.events += [
            said,
            ModelUsage(
                session_id=session.id,
                cause_id=said.id,
                model="local/smollm2",
                step=step,
                prompt_tokens=len(ids),
                completion_tokens=3,
                cost_usd=0.0,
                latency_ms=1.0,
                tool_mode="grammar",
                rendered_messages=list(messages),
                prompt_token_ids=list(ids),
                completion_token_ids=[7, 8, 9],
                logprobs=[{"token": t, "logprob": -0.5} for t in "abc"],
            ),
        ]
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": f"result {step}"}]
        ids += [7, 8, 9] + list(range(2000 + step * 40, 2040 + step * 40))
    return prompts


def test_renders_are_stored_once_and_read_back_whole(tmp_path: Path) -> None:
    session = FakeSession(model="local/smollm2").start().user("go")
    prompts = local_turns(session, 3)
    store = open_store(tmp_path / "f.db")
    Recorder(store).record_many(session.events)
    chunks = store.query("SELECT count(*) AS n FROM blobs WHERE kind = 'token_ids'")[0]["n"]
    # 3 prompts of ~1200 tokens (3 chunks each); their first two chunks are shared
    assert chunks == 2 + 3 and TOKEN_CHUNK == 512
    assert store.query("SELECT count(*) AS n FROM blobs WHERE kind = 'rendered_message'")[0]["n"] == 2 + 2 * 2
    renders = Renders(store)
    for step, ids in enumerate(prompts):
        render = renders.at(session.id, 2 + step)  # the recorded system and user messages, then the replies
        assert render is not None and render.prompt_token_ids == ids and render.completion_token_ids == [7, 8, 9]
        assert render.messages[0] == SYSTEM and len(render.messages) == 2 + 2 * step
        assert render.tool_mode == "grammar" and len(render.logprobs) == 3
    rows = store.query("SELECT json FROM events WHERE type = 'model_usage'")
    event = json.loads(rows[-1]["json"])
    assert set(event["rendered_messages"]) == {"blobs"} and len(event["prompt_token_ids"]["blobs"]) == 3
    assert len(rows[-1]["json"]) < 2000  # the event row no longer holds the prompt


def test_a_database_from_the_first_schema_migrates(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite_utils.Database(path)
    m001_initial_schema(db)
    db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at REAL)")
    db.execute("INSERT INTO migrations VALUES ('m001_initial_schema', 0)")
    db.conn.commit()
    db.conn.close()
    store = open_store(path)
    store.close()
    conn = sqlite3.connect(path)
    columns = [r[1] for r in conn.execute("PRAGMA table_info(model_calls)")]
    assert columns[-4:] == ["tool_mode", "rendered", "prompt_token_ids", "completion_token_ids"]
    assert [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY name")] == [n for n, _ in MIGRATIONS]
    assert "m002_model_call_renders" in [n for n, _ in MIGRATIONS]
