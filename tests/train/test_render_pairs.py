"""A correction and the failed reply it replaces reach the trainer tokenised the same way: both the
ids the model sampled, or both the tokenizer's encoding of their text, neither with an end-of-turn
token, so that nothing but their content tells them apart.

The session is an embedded-model session as the recorder sees it (grammar tool mode, the rendered
prompt and the ids fed and sampled), recorded into SQLite and exported by `teachback export`; the
tokenizer is a byte-level one made here whose encoding of ` "` differs from the sampler's, as
llama.cpp's and the Hugging Face tokenizer's do on some whitespace."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from agent.protocol import AssistantMessage, ModelUsage
from feedback_store import Recorder, open_store
from feedback_store.export.export import export
from tests.store.events import FakeSession, edit

pytest.importorskip("transformers")

FAILED = '{"name": "read_file", "arguments": { "path": "/tmp/t14/app.py" }}'
FIXED = '{"name": "read_file", "arguments": { "path": "app.py" }}'


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """ChatML, bytes as tokens, and one merge (` "`) the sampler below never makes."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<|im_start|>": 0, "<|im_end|>": 1}
    for char in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab[char] = len(vocab)
    vocab['Ġ"'] = len(vocab)
    model = Tokenizer(models.BPE(vocab=vocab, merges=[("Ġ", '"')]))
    model.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    model.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=model, eos_token="<|im_end|>", bos_token="<|im_start|>")
    fast.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    fast.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    return fast


def sampled(tokenizer: Any, text: str) -> list[int]:
    """The ids a sampler that never merges would emit for `text` (the same text, other ids)."""
    return [i for char in text for i in tokenizer.encode(char, add_special_tokens=False)]


def embedded_session(tokenizer: Any) -> FakeSession:
    """A path outside the workspace, the read that then worked, and an edit that broke the file and
    its fix, each reply with the render the embedded model records."""
    s = FakeSession(model="local/smollm2").start(system="You are an agent.").user("read app.py")
    s.call("read_file", FAILED, ok=False, error_kind="outside_workspace", target="/tmp/t14/app.py", result="outside")
    s.call("read_file", FIXED, target="app.py", result="print('Hello')\n")
    broken = '{"name": "edit_file", "arguments": { "path": "app.py", "old_text": "\')", "new_text": "\'" }}'
    s.call("edit_file", broken, target="app.py", edits=[edit("app.py", "p('a')\n", "p('a'\n", syntax_error="app.py:1")])
    fix = '{"name": "edit_file", "arguments": { "path": "app.py", "old_text": "\'\\n", "new_text": "\')\\n" }}'
    s.call("edit_file", fix, target="app.py", edits=[edit("app.py", "p('a'\n", "p('b')\n")])
    rendered: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "read app.py"},
    ]
    events = []
    for event in s.events:
        if isinstance(event, AssistantMessage):
            raw = event.message["tool_calls"][0]["function"]["arguments"]
            event = dataclasses.replace(event, message={**event.message, "content": raw})
            reply = raw
        if isinstance(event, ModelUsage):
            prompt = tokenizer.apply_chat_template(rendered, add_generation_prompt=True, return_dict=True)["input_ids"]
            event = dataclasses.replace(
                event,
                tool_mode="grammar",
                rendered_messages=list(rendered),
                prompt_token_ids=list(prompt),
                completion_token_ids=sampled(tokenizer, reply),
                logprobs=[{"token": "x", "logprob": -0.5}] * len(sampled(tokenizer, reply)),
            )
            rendered += [{"role": "assistant", "content": reply}, {"role": "user", "content": "<tool_result>"}]
        events.append(event)
    s.events = events
    return s


def records(tmp_path: Path, session: FakeSession) -> dict[str, dict[str, Any]]:
    store = open_store(tmp_path / "f.db")
    Recorder(store).record_many(session.finish().events)
    store.close()
    export([tmp_path / "f.db"], "sdpo", tmp_path / "sdpo.jsonl", tokenizer="estimate")
    found = [json.loads(line) for line in (tmp_path / "sdpo.jsonl").read_text().splitlines()]
    return {r["error_kind"]: r for r in found}


def test_chosen_and_rejected_are_tokenised_the_same_way(tokenizer: Any, tmp_path: Path) -> None:
    from trainer.render import render

    by_kind = records(tmp_path, embedded_session(tokenizer))
    eos = tokenizer.eos_token_id
    wrong_path = by_kind["outside_workspace"]
    assert wrong_path["chosen_derived"] is False and wrong_path["rendered"]["chosen"] == FIXED
    # the correction is the model's own reply: the ids it sampled for it, beside those of the failed reply
    assert wrong_path["rendered"]["chosen_token_ids"] == sampled(tokenizer, FIXED)
    ids = render(wrong_path, tokenizer)
    assert ids.recorded and ids.completion == sampled(tokenizer, FAILED)
    assert ids.chosen == sampled(tokenizer, FIXED) and ids.rejected == ids.completion
    # the two differ where their content does, and nowhere else: no spacing, no end-of-turn token
    head = next(i for i, (a, b) in enumerate(zip(ids.chosen, ids.rejected)) if a != b)
    tail = next(i for i, (a, b) in enumerate(zip(ids.chosen[::-1], ids.rejected[::-1])) if a != b)
    assert tokenizer.decode(ids.rejected[head : len(ids.rejected) - tail]) == "/tmp/t14/"
    assert ids.chosen[head : len(ids.chosen) - tail] == []

    lint = by_kind["syntax_error"]  # its correction is derived from the file's net change: no sampled ids
    assert lint["chosen_derived"] is True and lint["rendered"]["chosen_token_ids"] is None
    assert lint["rendered"]["chosen"].startswith('{"name": "edit_file", "arguments": { "path": "app.py"')
    ids = render(lint, tokenizer)
    assert ids.recorded and ids.completion == lint["rendered"]["completion_token_ids"]  # sdpo scores the sample
    # compared with a reply the tokenizer writes, the failed reply is written by the tokenizer too
    assert ids.rejected == tokenizer.encode(lint["rendered"]["completion"], add_special_tokens=False)
    assert ids.chosen == tokenizer.encode(lint["rendered"]["chosen"], add_special_tokens=False)
    assert ids.rejected != ids.completion  # (this tokenizer merges ` "`; the sampler did not)
    for reply in (ids.chosen, ids.rejected, ids.completion):
        assert reply[-1] != eos
