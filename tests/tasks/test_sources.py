"""Each new source of training data yields only records whose chosen reply succeeded when run at
its state: repaired wrong paths, replies drawn with a hint in context, no-tool counter-examples.
States come from a scripted attempt at the sample suite; hinted and no-tool replies from the scripted
model, sampled as the embedded model would be."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tasks.branches import At, Branch, build_records
from tasks.probes import TRAINING_QUESTIONS, questions
from tasks.rollout import run_attempt
from tasks.sample_suite import sample_suite_path
from tasks.sources import hinted, nearest_path, no_tool, repaired
from tasks.states import Sampler, Scratch, load_states
from tests.conftest import call, turn
from tests.tasks.test_rollout import SOLVES, sample_task, spec
from tests.tasks.test_states import labelled

SUITE = sample_suite_path()


@pytest.fixture
def first_state(script, tmp_path: Path):
    db = tmp_path / "feedback.db"
    record = run_attempt(spec(script(*SOLVES), db, work_dir=str(tmp_path / "w")))
    assert record["reward"] == 1.0
    return load_states(db)[0]


def failed_branch(state, path: str, *, seed: int = 0) -> Branch:
    read = call("read_file", {"path": path})
    label = labelled(state, read)
    text = f'<tool_call>\n{{"name": "read_file", "arguments": {json.dumps({"path": path})}}}\n</tool_call>'
    return Branch(seed=seed, label=label, prompt=[{"role": "user", "content": "p"}], text=text)


def run_text(state, text: str):
    """The label of a reply's text, run at the state afresh."""
    from agent.protocol.textcalls import parse_reply

    parsed = parse_reply(text, [t["function"]["name"] for t in state.tools])
    return labelled(state, *[{"function": c["function"]} for c in parsed.tool_calls])


def test_a_wrong_path_is_repaired_to_the_nearest_one_and_kept_only_when_it_runs(first_state) -> None:
    task = sample_task(first_state.task_id)
    scratch = Scratch(first_state, task, SUITE)
    try:
        assert nearest_path("textkit/word.py", scratch.root) == "textkit/words.py"
        assert nearest_path(f"{scratch.root}/textkit/words.py", scratch.root) == "textkit/words.py"
        wrong = failed_branch(first_state, "textkit/word.py")
        assert wrong.label.kind == "not_found" and wrong.failure
        fixed = asyncio.run(repaired(first_state, wrong, scratch, task, SUITE))
        assert fixed is not None and fixed.source == "repaired" and fixed.label.kind == "ok"
        assert '"textkit/words.py"' in fixed.text and fixed.completion_ids is None
        assert run_text(first_state, fixed.text).kind == "ok"  # it succeeds when run again
        nowhere = failed_branch(first_state, "zzz/qqqq_xxxxx.cfg")
        assert asyncio.run(repaired(first_state, nowhere, scratch, task, SUITE)) is None
        records = build_records(At("s", 0, first_state.task_id), [wrong, fixed])
        assert [r["source"] for r in records["sft"]] == ["repaired"] and len(records["dpo"]) == 1
        assert all(run_text(first_state, r["chosen"][0]["content"]).kind == "ok" for r in records["dpo"])
    finally:
        scratch.close()


def test_hinted_replies_are_kept_only_where_they_succeed_without_the_hint(first_state, script) -> None:
    task = sample_task(first_state.task_id)
    scratch = Scratch(first_state, task, SUITE)
    # The scripted model answers by the conversation, not the seed: one script per seed.
    replies = [
        call("read_file", {"path": "textkit/nope.py"}),
        call("read_file", {"path": "textkit/words.py"}),
        call("list_files", {"path": "no/such/folder"}),
    ]
    found = []
    try:
        for seed, one in enumerate(replies):
            sampler = Sampler(script(turn(one), name=f"hint{seed}.json"))
            hint = "read_file failed: not_found."
            found += asyncio.run(hinted(first_state, sampler, hint, range(seed, seed + 1), scratch, task, SUITE, str))
    finally:
        scratch.close()
    assert [b.label.kind for b in found] == ["ok"] and found[0].source == "hinted" and found[0].prompt is None
    assert run_text(first_state, found[0].text).kind == "ok"
    wrong = failed_branch(first_state, "textkit/nope.py")
    records = build_records(At("s", 0, first_state.task_id), [wrong, *found])
    assert records["sft"][0]["prompt"] == wrong.prompt  # the student's prompt, which never held the hint
    assert records["dpo"][0]["source"] == "hinted"


def test_no_tool_counter_examples_choose_finish_and_reject_a_call(first_state, script) -> None:
    found = []
    for number, one in enumerate([call("finish", {"summary": "4"}), call("read_file", {"path": "textkit/words.py"})]):
        found += asyncio.run(no_tool(first_state, Sampler(script(turn(one), name=f"q{number}.json")), 1, str))
    asked = found[0].prompt[-1]["content"] if found[0].prompt else None
    assert [b.label.kind for b in found] == ["finished", "over_call"]
    assert all(b.source == "no_tool" for b in found)
    records = build_records(At("s", -1, first_state.task_id), found)
    assert [r["label"] for r in records["sft"]] == ["finished"]
    assert records["dpo"][0]["labels"] == {"chosen": "finished", "rejected": "over_call"}
    assert not set(questions()) & set(questions(TRAINING_QUESTIONS))  # never a held-out probe
    assert asked is None or asked in questions(TRAINING_QUESTIONS)
