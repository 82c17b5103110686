"""A recorded turn of the embedded model, exported, re-renders to the token ids the model was fed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from agent.config import Settings  # noqa: E402
from agent.protocol import UserInput  # noqa: E402
from agent.providers.llama_engine import model_path  # noqa: E402
from agent.runtime import open_session  # noqa: E402
from feedback_store import Recorder, open_store  # noqa: E402
from feedback_store.content.renders import Renders  # noqa: E402
from feedback_store.export.export import export  # noqa: E402
from tests.conftest import git  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.real_model, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two steps of local/smollm2 whose replies are cut at 4 tokens: each is a malformed call."""
    import asyncio

    root = tmp_path_factory.mktemp("local") / "proj"
    root.mkdir()
    (root / "app.py").write_text("def greet(name):\n    return 'Hello, ' + name\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "empty")
    db = root.parent / "feedback.db"
    settings = Settings(model="local/smollm2", approval="full-auto", max_steps=2, max_tokens=4, repo_map_tokens=0)

    async def run() -> None:
        store = open_store(db)
        session = open_session(root, settings, frontend="test")
        session.subscribe(Recorder(store))
        await session.run(UserInput(text="Read app.py"))
        store.close()

    asyncio.run(run())
    return db


def test_a_recorded_turn_re_renders_to_the_same_token_ids(recorded: Path, tmp_path: Path) -> None:
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    result = export([recorded], "sdpo", tmp_path / "sdpo.jsonl", tokenizer="estimate")
    record = json.loads((tmp_path / "sdpo.jsonl").read_text().splitlines()[0])
    assert result.records == 1 and result.near_duplicates == 1  # the second step repeated the first mistake
    rendered = record["rendered"]
    assert rendered["tool_mode"] == "grammar"
    assert "## read_file" in rendered["messages"][0]["content"]  # the tools were text in the system prompt
    assert record["prompt"][0]["content"] != rendered["messages"][0]["content"]  # the canonical view is not

    store = open_store(recorded)
    later = Renders(store).at(record["session_id"], len(record["prompt"]) + 2)  # the second model call
    assert later is not None and later.messages[2]["content"] == rendered["completion"]  # its own raw reply

    llm = Llama(model_path=str(model_path("smollm2")), vocab_only=True, verbose=False)
    special = lambda ids: llm.detokenize(ids, special=True).decode()  # noqa: E731
    formatter = Jinja2ChatFormatter(
        template=llm.metadata["tokenizer.chat_template"],
        eos_token=special([llm.token_eos()]),
        bos_token=special([llm.token_bos()]),
    )
    for messages, prompt_ids in (
        (rendered["messages"], rendered["prompt_token_ids"]),
        (later.messages, later.prompt_token_ids),
    ):
        prompt = formatter(messages=messages)
        assert llm.tokenize(prompt.prompt.encode(), add_bos=not prompt.added_special, special=True) == prompt_ids
    assert len(rendered["completion_token_ids"]) == len(rendered["logprobs"]) == 4
    assert llm.detokenize(rendered["completion_token_ids"]).decode() == rendered["completion"]
    assert all(lp["logprob"] <= 0 for lp in rendered["logprobs"])


def test_successive_calls_store_their_shared_prompt_once(recorded: Path) -> None:
    store = open_store(recorded)
    calls = store.query("SELECT rendered, prompt_token_ids FROM model_calls ORDER BY ts")
    assert len(calls) == 2
    first, second = (json.loads(c["prompt_token_ids"]) for c in calls)
    assert first[0] == second[0]  # the first 512-token chunk is one blob for both calls
    messages = [json.loads(c["rendered"]) for c in calls]
    assert messages[1][:2] == messages[0][:2]  # system and user message: the same blobs
    event = json.loads(store.query("SELECT json FROM events WHERE type = 'model_usage' LIMIT 1")[0]["json"])
    assert set(event["prompt_token_ids"]) == {"blobs"}  # the event row refers to the blobs
