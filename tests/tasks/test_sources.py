"""Each new source of training data yields only records whose chosen reply succeeded when run at
its state: repaired wrong paths, replies drawn with a hint in context, no-tool counter-examples,
replies drawn one step after a verified success (whose state is the one a session records).
States come from a scripted attempt at the sample suite; hinted and no-tool replies from the scripted
model, sampled as the embedded model would be."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agent.protocol.textcalls import render_call as render
from tasks.branches import At, Branch, BranchConfig, build_records, forward_branches
from tasks.probes import TRAINING_QUESTIONS, questions
from tasks.rollout import run_attempt
from tasks.sample_suite import sample_suite_path
from tasks.sources import hinted, nearest_path, no_tool, repaired
from tasks.states import Sampler, Scratch, load_states, next_state
from tests.conftest import call, turn
from tests.tasks.test_rollout import RESTORE, SOLVES, sample_task, spec
from tests.tasks.test_states import labelled

SUITE = sample_suite_path()


@pytest.fixture
def solved_states(script, tmp_path: Path):
    """The states of a scripted attempt that reads words.py, restores word_count and finishes."""
    db = tmp_path / "feedback.db"
    record = run_attempt(spec(script(*SOLVES), db, work_dir=str(tmp_path / "w")))
    assert record["reward"] == 1.0
    return load_states(db)


@pytest.fixture
def first_state(solved_states):
    return solved_states[0]


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


def _files(edits: list[dict]) -> list[tuple]:
    return [(e["path"], e["kind"], e["before"], e["after"], e.get("new_path")) for e in edits]


def test_the_state_one_step_after_a_success_is_the_one_a_session_records(solved_states) -> None:
    """next_state from each recorded state and its recorded reply gives the session's own next state:
    the same conversation, the same edits and the same loop-guard memory."""
    from agent.model import ModelReply

    task = sample_task(solved_states[0].task_id)
    for here, there in zip(solved_states, solved_states[1:]):
        scratch = Scratch(here, task, SUITE)
        try:
            after = asyncio.run(next_state(here, ModelReply(message=here.reply), scratch.copy("x"), task, SUITE))
        finally:
            scratch.close()
        assert after is not None and after.step == there.step
        assert after.messages == there.messages
        assert _files(after.edits) == _files(there.edits) and after.edit_count == there.edit_count
        assert after.previous_step == there.previous_step and after.turn_calls == there.turn_calls
    last = solved_states[-1]  # its reply is `finish`: the attempt ends, no state follows
    scratch = Scratch(last, task, SUITE)
    try:
        assert asyncio.run(next_state(last, ModelReply(message=last.reply), scratch.copy("x"), task, SUITE)) is None
    finally:
        scratch.close()


def test_forward_branches_are_drawn_one_step_after_a_success_and_chosen_only_where_they_succeed(
    first_state, script, tmp_path: Path
) -> None:
    task = sample_task(first_state.task_id)
    read = call("read_file", {"path": "textkit/words.py"})
    success = Branch(seed=0, label=labelled(first_state, read), prompt=None, text=render(read))
    assert success.success
    config = BranchConfig(db=tmp_path / "x.db", out=tmp_path, task_file=SUITE, forward_samples=1, repairs=False)
    scratch = Scratch(first_state, task, SUITE)
    found, after = [], None
    try:
        replies = [call("edit_file", RESTORE), call("read_file", {"path": "textkit/nope.py"})]
        for number, one in enumerate(replies):
            # The scripted model answers by the count of assistant messages: the state ahead has one.
            sampler = Sampler(script(turn(read), turn(one), name=f"ahead{number}.json"))
            after, drawn = asyncio.run(forward_branches(config, first_state, [success], sampler, scratch, task, str))
            found += drawn
        failed = Branch(seed=0, label=labelled(first_state, replies[1]), prompt=None, text="x")
        assert asyncio.run(forward_branches(config, first_state, [failed], sampler, scratch, task, str)) is None
    finally:
        scratch.close()
    assert after.step == first_state.step + 1 and after.messages[-1]["role"] == "tool"
    assert "def word_count" in after.messages[-1]["content"]  # the success's result is in the conversation
    assert [(b.label.kind, b.source) for b in found] == [("ok", "forward"), ("not_found", "forward")]
    records = build_records(At("s", after.step, after.task_id, ahead=True), found)
    assert [r["source"] for r in records["sft"]] == ["forward"] and len(records["dpo"]) == 1
    chosen = [r["completion"][0]["content"] for r in records["sft"]] + [
        r["chosen"][0]["content"] for r in records["dpo"]
    ]
    assert all(run_text(after, text).kind == "ok" for text in chosen)  # each succeeds when run at the state ahead
    recorded = build_records(At("s", after.step, after.task_id), [success])["sft"]
    assert records["sft"][0]["id"] != recorded[0]["id"]  # never the id of the recorded state's own record


def test_a_reply_that_deleted_a_file_is_never_a_verified_success() -> None:
    """It ran, but nothing at the state checks what it removed: no sft record, no chosen side, no
    demonstration is made of it (the learning round's data once held 13 of 76 sft records that
    deleted a file, and every adapter then tried deletions twice as often as the base)."""
    from tasks.states import Label

    prompt = [{"role": "user", "content": "make the tests pass"}]
    deleted = Branch(0, Label("ok", ("delete_file",)), prompt, render(call("delete_file", {"path": "textkit/slug.py"})))
    read = Branch(1, Label("ok", ("read_file",)), prompt, render(call("read_file", {"path": "textkit/slug.py"})))
    wrong = Branch(2, Label("not_found", ("read_file",)), prompt, render(call("read_file", {"path": "slug.py"})))
    assert not deleted.success and read.success and wrong.failure
    records = build_records(At("s", 0, "t"), [deleted, wrong])
    assert records == {"sft": [], "dpo": [], "sdpo": []}
    records = build_records(At("s", 0, "t"), [deleted, read, wrong])
    assert [r["seed"] for r in records["sft"]] == [1]
    assert "delete_file" not in json.dumps(records["dpo"] + records["sdpo"])
