"""The token ids the trainer sees for a recorded pair: the ids the embedded model was fed and
sampled, the teacher's prompt sharing the student's up to the reply, and corrections as the model
writes them."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from agent.config import Settings
from agent.protocol import UserInput
from agent.runtime import open_session
from feedback_store import Recorder, open_store
from feedback_store.export.export import export
from tests.conftest import git, turn

pytestmark = [pytest.mark.slow, pytest.mark.real_model, pytest.mark.timeout(900)]

OPEN = '{"name": "open_file", "arguments": {"path": "app.py"}}'


def record_session(root: Path, settings: Settings, text: str) -> Path:
    repo = root / "proj"
    repo.mkdir()
    (repo / "app.py").write_text("def greet(name):\n    return 'Hello, ' + name\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "empty")
    db = root / "feedback.db"

    async def run() -> None:
        store = open_store(db)
        session = open_session(repo, settings, frontend="test")
        session.subscribe(Recorder(store))
        await session.run(UserInput(text=text))
        store.close()

    asyncio.run(run())
    return db


def sdpo_records(db: Path, out: Path) -> list[dict[str, Any]]:
    export([db], "sdpo", out, tokenizer="estimate")
    return [json.loads(line) for line in out.read_text().splitlines()]


@pytest.fixture(scope="module")
def tokenizer(embedded_model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(embedded_model_dir, local_files_only=True)


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """A grammar-mode session of the scripted model: an unknown tool, then the call that worked."""
    root = tmp_path_factory.mktemp("scripted")
    script = root / "script.json"
    script.write_text(
        json.dumps(
            [
                turn(content=OPEN),
                turn(content='{"name": "read_file", "arguments": {"path": "app.py"}}'),
                turn(content='{"name": "finish", "arguments": {"summary": "read it"}}'),
            ]
        )
    )
    settings = Settings(
        model=f"scripted/{script}", tool_mode="grammar", approval="full-auto", repo_map_tokens=0, lessons=False
    )
    return sdpo_records(record_session(root, settings, "Read app.py"), root / "sdpo.jsonl")


def test_a_recorded_turn_of_the_embedded_model_is_trained_on_the_ids_llama_cpp_was_fed(
    tokenizer: Any, tmp_path: Path
) -> None:
    pytest.importorskip("llama_cpp")
    from agent.providers.llama_engine import load_engine, model_path
    from trainer.render import render
    from trainer.weights import EMBEDDED

    settings = Settings(
        model="local/smollm2", approval="full-auto", max_steps=1, max_tokens=6, repo_map_tokens=0, lessons=False
    )
    [record] = sdpo_records(record_session(tmp_path, settings, "Read app.py"), tmp_path / "sdpo.jsonl")
    engine = load_engine(str(model_path(EMBEDDED)))
    fed = engine.formatter(messages=record["rendered"]["messages"])  # what the provider renders for llama.cpp
    llama_ids = engine.llm.tokenize(fed.prompt.encode(), add_bos=not fed.added_special, special=True)

    rendered = render(record, tokenizer)
    assert rendered.recorded and rendered.prompt == llama_ids == record["rendered"]["prompt_token_ids"]
    assert rendered.completion == record["rendered"]["completion_token_ids"] and len(rendered.completion) == 6
    assert engine.llm.detokenize(rendered.completion).decode() == record["rendered"]["completion"]
    assert rendered.sampler_logprobs == [lp["logprob"] for lp in record["rendered"]["logprobs"]]
    generation = tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    assert rendered.prompt[rendered.shared :] == generation == rendered.teacher[-len(generation) :]
    assert rendered.teacher[: rendered.shared] == rendered.prompt[: rendered.shared]
    assert record["feedback"] in tokenizer.decode(rendered.teacher[rendered.shared :])

    # Without the recorded ids the conversation renders to the same text; its ids may differ where
    # llama.cpp and the Hugging Face tokenizer split whitespace differently (" \n": one token or two).
    bare = {**record, "rendered": {**record["rendered"], "prompt_token_ids": None, "completion_token_ids": None}}
    again = render(bare, tokenizer)
    assert not again.recorded and tokenizer.decode(again.prompt) == fed.prompt
    assert tokenizer.decode(again.completion) == record["rendered"]["completion"]


def test_a_text_mode_record_without_ids_renders_from_the_messages_the_model_was_given(
    scripted: list[dict[str, Any]], tokenizer: Any
) -> None:
    from trainer.render import render, template_ids

    [record] = scripted
    rendered = render(record, tokenizer)
    messages = [{"role": m["role"], "content": m["content"]} for m in record["rendered"]["messages"]]
    assert not rendered.recorded and rendered.sampler_logprobs is None
    assert rendered.prompt == template_ids(tokenizer, messages, None, generation=True)
    assert "## read_file" in tokenizer.decode(rendered.prompt)  # the tools, as text in the system prompt
    assert tokenizer.decode(rendered.completion) == OPEN  # the raw reply, no end-of-turn token
    # the correction ends as the failed reply does, before the end-of-turn token
    assert tokenizer.decode(rendered.chosen) == '{"name": "read_file", "arguments": {"path": "app.py"}}'
    assert rendered.rejected == rendered.completion


@pytest.mark.parametrize(
    ("hint", "has_failed_reply", "has_correction"),
    [
        ("feedback", False, False),
        ("demonstration", False, True),
        ("hindsight", True, True),
    ],
)
def test_each_hint_tells_the_teacher_what_it_promises(
    scripted: list[dict[str, Any]], tokenizer: Any, hint: str, has_failed_reply: bool, has_correction: bool
) -> None:
    from trainer.render import render

    [record] = scripted
    rendered = render(record, tokenizer, hint)
    told = tokenizer.decode(rendered.teacher[rendered.shared :])
    assert told.startswith("<|im_start|>user\n") and told.endswith("<|im_end|>\n<|im_start|>assistant\n")
    assert record["feedback"] in told
    assert ('open_file({"path": "app.py"})' in told) is has_failed_reply  # the failed call, as the hindsight quotes it
    assert (
        '{"name": "read_file", "arguments": {"path": "app.py"}}' in told  # the correction: as the model writes it
        or 'read_file({"path": "app.py"})' in told
    ) is has_correction  # or as the hindsight quotes it


def test_recorded_ids_of_another_vocabulary_are_rendered_again(
    scripted: list[dict[str, Any]], tokenizer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from trainer.render import render

    [record] = scripted
    own = render(record, tokenizer)
    foreign = {
        **record,
        "rendered": {
            **record["rendered"],
            "prompt_token_ids": [i + 7 for i in own.prompt],
            "completion_token_ids": [1, 2, 3],
            "logprobs": None,
        },
    }
    with caplog.at_level(logging.WARNING, logger="trainer.render"):
        again = render(foreign, tokenizer)
    assert "rendering it again" in caplog.text
    assert not again.recorded and again.prompt == own.prompt and again.completion == own.completion


def test_an_unknown_hint_says_which_there_are(scripted: list[dict[str, Any]], tokenizer: Any) -> None:
    from trainer.render import RenderError, render

    with pytest.raises(RenderError, match="feedback, demonstration, hindsight"):
        render(scripted[0], tokenizer, "oracle")
