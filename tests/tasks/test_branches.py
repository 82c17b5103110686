"""Training data from branches: the records of one state's labelled samples (SFT on successes, DPO
and SDPO on a failure with a same-state success), redacted with their token ids dropped where a
secret was; and, on the embedded model, `teachback tasks branch` on a recorded attempt: every
success and failure is what labelling it again says, the completions are the raw sampled texts,
chosen and rejected render the same way after the same prompt, and the files load with datasets."""

from __future__ import annotations

import asyncio
import io
import json
from dataclasses import replace
from pathlib import Path

import pytest

from agent.model import ModelReply
from cli.entry import main
from feedback_store.redaction.redactor import Redactor
from tasks.branches import FORMATS, At, Branch, BranchResult, RecordWriter, build_records
from tasks.rollout import run_attempt
from tasks.sample_suite import sample_suite_path
from tasks.states import Label, Scratch, label_reply, load_states
from tests.tasks.test_rollout import WORD_COUNT, sample_task, spec

AT = At("s1", 2, WORD_COUNT)
PROMPT = [{"role": "system", "content": "tools"}, {"role": "user", "content": "fix it"}]
READ = '{ "name": "read_file", "arguments": { "path": "textkit/words.py" } }'


def branch(seed: int, kind: str, text: str, prompt: list | None = None) -> Branch:
    return Branch(seed, Label(kind, ("read_file",)), prompt or PROMPT, text, [1, 2, 3], [10 + seed, 20 + seed])


def test_successes_are_sft_and_each_failure_is_paired_with_a_same_state_success() -> None:
    branches = [
        branch(0, "ok", READ),
        branch(1, "not_found", '{ "name": "read_file", "arguments": { "path": "nope.py" } }'),
        branch(2, "ok", READ),  # the same text again: once
        branch(3, "finished", '{ "name": "finish", "arguments": { "summary": "done" } }'),
        branch(4, "premature_finish", '{ "name": "finish", "arguments": {} }'),
        branch(5, "cut_off", '{ "name": "read'),  # did not end its turn
        branch(6, "answer", "I cannot."),
        branch(7, "failing_test", '{ "name": "run_command", "arguments": { "command": "pytest" } }'),
        branch(8, "repeated_call", READ, prompt=[*PROMPT, {"role": "user", "content": "other"}]),
        replace(branch(9, "malformed_call", '{ "name": "read_file", "arguments": { "pa'), ended=False),
    ]
    records = build_records(AT, branches)
    assert [r["seed"] for r in records["sft"]] == [0, 3]
    assert records["sft"][0]["completion"] == [{"role": "assistant", "content": READ}]
    assert records["sft"][1]["completion"][0]["content"] == '{ "name": "finish", "arguments": { "summary": "done" } }'
    assert [(r["seeds"], r["labels"]) for r in records["dpo"]] == [
        ({"chosen": 0, "rejected": 1}, {"chosen": "ok", "rejected": "not_found"}),
        ({"chosen": 3, "rejected": 4}, {"chosen": "finished", "rejected": "premature_finish"}),
    ]
    dpo = records["dpo"][0]
    assert dpo["prompt"] is PROMPT and dpo["chosen"] == [{"role": "assistant", "content": READ}]
    assert dpo["token_ids"] == {"prompt": [1, 2, 3], "chosen": [10, 20], "rejected": [11, 21]}
    sdpo = records["sdpo"][1]
    assert (sdpo["seeds"], sdpo["labels"]["completion"]) == ({"completion": 4, "demonstration": 3}, "premature_finish")
    assert sdpo["completion"][0]["content"] == '{ "name": "finish", "arguments": {} }'
    assert "tests still fail" in sdpo["feedback"] and sdpo["feedback"] in sdpo["privileged_context"]
    for kind, found in records.items():
        assert {r["format"] for r in found} == {FORMATS[kind]} == {f"teachback-branch-{kind}-1"}
        assert all((r["session_id"], r["step"], r["task_id"]) == ("s1", 2, WORD_COUNT) for r in found)
    assert records["dpo"][0]["id"] == "s1:2:0:1" and records["sft"][0]["id"] == "s1:2:0"


def test_a_state_without_a_success_or_a_failure_makes_no_pair() -> None:
    only_failures = build_records(AT, [branch(0, "not_found", "a"), branch(1, "no_match", "b")])
    assert only_failures == {"sft": [], "dpo": [], "sdpo": []}
    only_successes = build_records(AT, [branch(0, "ok", "a"), branch(1, "cut_off", "b")])
    assert (len(only_successes["sft"]), only_successes["dpo"]) == (1, [])


def test_records_are_redacted_and_ids_that_spell_a_secret_dropped() -> None:
    secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    files = {kind: io.StringIO() for kind in FORMATS}
    result = BranchResult()
    leaky = branch(1, "not_found", f'{{ "name": "read_file", "arguments": {{ "path": "{secret}" }} }}')
    RecordWriter(files, Redactor(env={}), result).add(AT, [branch(0, "ok", READ), leaky])
    [dpo] = [json.loads(line) for line in files["dpo"].getvalue().splitlines()]
    assert secret not in json.dumps(dpo) and "[REDACTED:github_token]" in dpo["rejected"][0]["content"]
    assert dpo["token_ids"] == {"prompt": [1, 2, 3], "chosen": [10, 20], "rejected": None}
    assert result.records == {"sft": 1, "dpo": 1, "sdpo": 1} and result.samples == 2
    assert result.labels == {"ok": 1, "not_found": 1}


def test_branch_says_what_to_give_instead(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "branch", str(tmp_path / "none.db"), "--out", str(tmp_path / "o")]) == 2
    assert "does not exist: give a feedback database" in capsys.readouterr().err
    args = ["branch", str(tmp_path / "none.db"), "--out", str(tmp_path / "o"), "--model", "gpt-4o"]
    assert main(["tasks", *args]) == 2
    assert "give local/<model>[@adapter]" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# On the embedded model


def relabelled(state, text: str, ids: list[int] | None) -> Label:
    """The label of `text` as a reply at `state`, parsed as the model's reply is."""
    from agent.protocol import textcalls

    parsed = textcalls.parse_reply(text, [t["function"]["name"] for t in state.tools], id_prefix="call_x")
    message = {"role": "assistant", "content": text, **({"tool_calls": parsed.tool_calls} if parsed.tool_calls else {})}
    reply = ModelReply(message=message, format_error=parsed.error, completion_tokens=len(ids or []))
    task = sample_task(state.task_id)
    scratch = Scratch(state, task, sample_suite_path())
    try:
        return asyncio.run(label_reply(state, reply, scratch.copy("again"), task, sample_suite_path(), cap=64))
    finally:
        scratch.close()


def chat_template():
    """The model's own chat template (from its GGUF file), as TRL applies one: the prompt with the
    generation prompt, and the whole conversation."""
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from agent.providers.llama_engine import model_path

    vocab = Llama(model_path=str(model_path("smollm2")), vocab_only=True, verbose=False)
    special = lambda ids: vocab.detokenize(ids, special=True).decode()  # noqa: E731
    marks = {"eos_token": special([vocab.token_eos()]), "bos_token": special([vocab.token_bos()])}
    template = vocab.metadata["tokenizer.chat_template"]
    prompt = Jinja2ChatFormatter(template=template, add_generation_prompt=True, **marks)
    whole = Jinja2ChatFormatter(template=template, add_generation_prompt=False, **marks)
    return vocab, prompt, whole


@pytest.mark.slow
@pytest.mark.real_model
@pytest.mark.timeout(900)
def test_branch_writes_verified_on_policy_records_that_datasets_load(tmp_path: Path, capsys) -> None:
    from datasets import Dataset, load_dataset

    db = tmp_path / "feedback.db"
    settings = {"max_steps": 3, "temperature": 0.8, "max_tokens": 64, "repo_map_tokens": 256, "local_threads": 1}
    record = run_attempt(spec("local/smollm2@none", db, WORD_COUNT, work_dir=str(tmp_path / "w"), overrides=settings))
    assert "error" not in record, record
    out = tmp_path / "branches"
    assert main(["tasks", "branch", str(db), "--out", str(out), "--samples", "3", "--max-tokens", "64"]) == 0
    said = capsys.readouterr()
    assert "state 1/" in said.err and "records: sft.jsonl" in said.out
    records = {kind: [json.loads(line) for line in (out / f"{kind}.jsonl").open()] for kind in FORMATS}
    assert records["sft"] and records["dpo"] and len(records["sdpo"]) == len(records["dpo"])

    states = {(s.session_id, s.step): s for s in load_states(db)}
    vocab, prompt_of, whole_of = chat_template()
    sides = [(r, "completion", "label") for r in records["sft"]]
    sides += [(r, side, ("labels", side)) for r in records["dpo"] for side in ("chosen", "rejected")]
    for r, side, where in sides:
        state = states[(r["session_id"], r["step"])]
        stored = r["label"] if where == "label" else r["labels"][side]
        text, ids = r[side][0]["content"], r["token_ids"][side]
        assert vocab.detokenize(ids, special=True).decode() == text  # the raw sampled text
        assert len(ids) < 64  # ended by the model, not at the cap
        again = relabelled(state, text, ids)
        assert again.kind == stored, (r["id"], side, again, stored)
        assert (again.kind in ("ok", "finished")) == (side != "rejected")
        if side == "rejected":
            assert again.kind == "premature_finish" or (again.call_error and again.kind != "cut_off")
        # The prompt is what the model was given, token for token.
        rendered = prompt_of(messages=r["prompt"])
        prompt_ids = vocab.tokenize(rendered.prompt.encode(), add_bos=not rendered.added_special, special=True)
        assert prompt_ids == r["token_ids"]["prompt"] == state.prompt_ids
    for r in records["dpo"]:  # chosen and rejected end alike: after their text, the template's end of turn
        head = prompt_of(messages=r["prompt"]).prompt
        tails = []
        for side in ("chosen", "rejected"):
            whole = whole_of(messages=[*r["prompt"], *r[side]]).prompt
            assert whole.startswith(head) and whole[len(head) :].startswith(r[side][0]["content"])
            tails.append(whole[len(head) + len(r[side][0]["content"]) :])
        assert tails[0] == tails[1] == "<|im_end|>\n"

    for kind, found in records.items():
        if found:
            assert len(Dataset.from_list(found)) == len(found)
            loaded = load_dataset("json", data_files=str(out / f"{kind}.jsonl"), cache_dir=str(tmp_path / "hf"))
            assert loaded["train"].num_rows == len(found)
