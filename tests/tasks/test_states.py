"""State replay: recorded moments of task attempts, labelled replies, and `teachback eval --states`.

The labeller runs a reply as the session would (schema, loop guards against the recorded prefix,
approval policy, real reads, edits on a copy, a graded finish); on llama.cpp, the recorded seed draws
the recorded reply again and its label is what the session recorded. Those mechanics run on the
two-layer test model as a GGUF file (`tiny_gguf`); the replay on the embedded model itself is
tests/train/test_demo_learn.py's, and its seeded sampling tests/tasks/test_reproducible.py's."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.model import ModelReply
from tasks.records import TaskError, load_tasks
from tasks.rollout import run_attempt
from tasks.sample_suite import sample_suite_path
from tasks.state_eval import MIN_CLUSTERS
from tasks.states import Label, Scratch, label_reply, load_states, recorded_sampler
from tests.conftest import call
from tests.tasks.test_rollout import FINISH, RESTORE, SOLVES, WORD_COUNT, sample_task, spec

ROOT = Path(__file__).resolve().parents[2]


def reply(*calls: dict) -> ModelReply:
    return ModelReply(
        message={
            "role": "assistant",
            "content": None,
            "tool_calls": [{**c, "id": f"call_{i}", "type": "function"} for i, c in enumerate(calls)],
        }
    )


def labelled(state, *calls: dict) -> Label:
    task = sample_task(state.task_id)
    scratch = Scratch(state, task, sample_suite_path())
    try:
        return asyncio.run(label_reply(state, reply(*calls), scratch.copy("x"), task, sample_suite_path()))
    finally:
        scratch.close()


@pytest.fixture
def solved(script, tmp_path: Path):
    """The states of a scripted attempt that reads words.py, restores word_count and finishes."""
    db = tmp_path / "feedback.db"
    record = run_attempt(spec(script(*SOLVES), db, work_dir=str(tmp_path / "w")))
    assert record["reward"] == 1.0
    return load_states(db)


def test_states_follow_the_recorded_session(solved) -> None:
    read, edit, finish = solved
    assert [s.step for s in solved] == [1, 2, 3] and {s.task_id for s in solved} == {WORD_COUNT}
    assert [s.recorded.kind for s in solved] == ["ok", "ok", "finished"]
    assert [m["role"] for m in read.messages] == ["system", "user"]
    assert edit.messages[-2]["tool_calls"][0]["function"]["name"] == "read_file"  # the conversation so far
    assert edit.messages[-1]["role"] == "tool" and len(finish.edits) == 1 and not edit.edits


def test_labelling_agrees_with_what_the_session_recorded(solved) -> None:
    for state in solved:
        calls = [c["function"] for c in state.reply["tool_calls"]]
        assert labelled(state, *({"function": c} for c in calls)) == state.recorded


def test_labels_come_from_running_the_reply_at_its_state(solved) -> None:
    read, edit, finish = solved
    assert labelled(read, call("finish", {"summary": "done"})).kind == "premature_finish"  # tests still fail
    assert labelled(finish, call("finish", {"summary": "done"})).kind == "finished"  # after the edit
    assert labelled(edit, call("read_file", {"path": "textkit/wordz.py"})).kind == "not_found"
    assert labelled(edit, call("read_file", {"path": "textkit/words.py"})).kind == "repeated_call"
    assert labelled(finish, call("read_file", {"path": "textkit/words.py"})).kind == "ok"  # an edit since
    assert labelled(edit, call("edit_file", {**RESTORE, "old_text": "raise Nope"})).kind == "no_match"
    assert labelled(finish, call("edit_file", RESTORE)).kind == "no_match"  # already applied at this state
    assert labelled(edit, call("read_file", "[" * 100_000)).kind == "malformed_json"
    assert labelled(edit, call("grep", {})).kind == "unknown_tool"
    assert labelled(edit, call("run_command", {"command": "curl -s https://example.com/x"})).kind == "denied"
    assert labelled(edit, call("run_command", {"command": "python -m pytest -q -x"})).kind == "failing_test"
    assert labelled(edit, call("run_command", {"command": "no-such-program --x"})).kind == "cannot_run"
    both = labelled(edit, call("edit_file", RESTORE), call("finish", {"summary": "done"}))
    assert both == Label("finished", ("edit_file", "finish"))  # the edit counts before the finish is graded
    assert labelled(edit, call("read_file", {"path": "nope.py"}), FINISH["tool_calls"][0]).kind == "not_found"


def test_a_finish_on_the_sealed_files_is_premature_without_running_the_tests(solved, tmp_path: Path) -> None:
    read, _, finish = solved
    alone = tmp_path / "alone" / "sample.jsonl"  # the task file without its snapshots: its tests cannot run
    alone.parent.mkdir()
    shutil.copy(sample_suite_path(), alone)

    def label(state, *calls: dict) -> Label:
        task = sample_task(state.task_id)
        scratch = Scratch(state, task, sample_suite_path())
        try:
            return asyncio.run(label_reply(state, reply(*calls), scratch.copy("x"), task, alone))
        finally:
            scratch.close()

    done = call("finish", {"summary": "done"})
    assert label(read, done) == Label("premature_finish", ("finish",))  # its FAIL_TO_PASS tests fail as sealed
    assert label(read, call("read_file", {"path": "textkit/words.py"}), done).kind == "premature_finish"
    with pytest.raises(TaskError, match="snapshot"):  # after a recorded edit the tests run
        label(finish, done)
    with pytest.raises(TaskError, match="snapshot"):  # after a command in the same reply too
        label(read, call("run_command", {"command": "true"}), done)


def test_a_reply_without_a_call_is_an_answer_or_cut_off(solved) -> None:
    state = solved[0]
    task = sample_task(state.task_id)
    scratch = Scratch(state, task, sample_suite_path())
    try:
        text = ModelReply(message={"role": "assistant", "content": "I cannot"}, completion_tokens=3)
        cut = ModelReply(
            message={"role": "assistant", "content": '{"name": "read'},
            completion_tokens=64,
            format_error="the reply ends inside a string",  # as a reply cut mid-call is read
        )
        found = [
            asyncio.run(label_reply(state, r, scratch.copy(n), task, sample_suite_path(), cap=64))
            for n, r in (("a", text), ("b", cut))
        ]
    finally:
        scratch.close()
    assert found == [Label("answer"), Label("malformed_call")]  # as the session records them
    assert [label.cut_off for label in found] == [False, True]
    assert not found[0].call_error and found[1].call_error
    assert found[1].failures == (("", "malformed_call", None),) and not found[0].failures  # keyed as its pair


def zero_adapter(path: Path, model: Path) -> Path:
    """A GGUF LoRA adapter for the GGUF file `model` whose product is zero everywhere: the base
    model, served as an adapter."""
    import numpy as np

    from trainer.gguf_lora import _write, base_info

    info = base_info(model)
    out, features = info.shapes["blk.0.attn_q.weight"][-2:]
    zeros = {"blk.0.attn_q.weight.lora_a": np.zeros((4, features)), "blk.0.attn_q.weight.lora_b": np.zeros((out, 4))}
    _write(path, info.arch, 8.0, zeros)
    return path


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_recorded_seed_draws_the_recorded_reply_and_eval_states_compares_arms(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    db = tmp_path / "feedback.db"
    model = f"local/{tiny_gguf}@none"
    settings = {"max_steps": 2, "temperature": 0.9, "max_tokens": 48, "repo_map_tokens": 256, "local_threads": 1}
    for task in load_tasks(sample_suite_path())[:MIN_CLUSTERS]:  # enough tasks for an interval
        attempt = spec(model, db, task.instance_id, work_dir=str(tmp_path / "w"), overrides=settings)
        record = run_attempt(attempt)
        assert "error" not in record, record
    states = load_states(db, max_per_session=1)
    assert len(states) == MIN_CLUSTERS and all(s.prompt_ids and s.reply_ids for s in states)
    every = load_states(db)
    later = [s for s in every if s.step > 1][:1]  # a prompt that reuses the cached prefix of the step before
    assert later, "the seeded attempts all ended at their first step"
    for state in [every[0], *later]:  # the recorded seed, cap and temperature draw the recorded reply again
        sampler = recorded_sampler(state, model)
        again = asyncio.run(sampler.sample(state, state.config["seed"]))
        assert again.prompt_token_ids == state.prompt_ids and again.completion_token_ids == state.reply_ids
        task = sample_task(state.task_id)
        scratch = Scratch(state, task, sample_suite_path())
        try:
            found = asyncio.run(label_reply(state, again, scratch.copy("r"), task, sample_suite_path(), sampler.cap))
        finally:
            scratch.close()
        assert found == state.recorded, (state.step, found, state.recorded)

    adapter = zero_adapter(tmp_path / "zero.gguf", tiny_gguf)
    done = subprocess.run(
        [sys.executable, "-m", "cli", "eval", "--states", str(db), "--adapter", str(adapter), "--serve", str(tiny_gguf),
         "--samples", "1", "--max-tokens", "48", "--per-session", "1", "--probes", "2", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    assert doc["states"] == len(states) and doc["samples_per_state"] == 1 and doc["clusters"] == MIN_CLUSTERS
    before, after = doc["arms"]["before"], doc["arms"]["after"]
    assert before["samples"] == after["samples"] == len(states)
    assert {"failure_rate", "call_error_rate", "by_kind", "premature_finish_rate", "call_rate", "tool_mix"} <= set(
        before
    )
    reproduced = doc["reproduced"]  # sample 0 at the seed the attempts recorded (attempt 0), the same cap
    assert reproduced["checked"] == reproduced["same_tokens"] == reproduced["labels_checked"] == len(states)
    assert reproduced["same_label"] == len(states)
    judged = doc["change"]
    change = judged["failures"]
    assert set(change) >= {"before", "after", "relative_change", "interval", "method", "outcome"}
    assert judged["outcome"] == change["outcome"] and "premature_finish" in judged["guards"]
    assert "detectable_change" in doc
    assert len(doc["probe_samples"]["probes"]) == 2  # --probes: at most that many, spread over the sessions
    assert all(len(doc["probe_samples"]["arms"][arm]) == 2 for arm in ("before", "after"))
    if change["events"]["before"]:  # the same model served as an adapter: an interval around no change
        assert change["interval"][0] <= 0 <= (change["interval"][1] if change["interval"][1] is not None else 1)
        assert change["outcome"] not in ("effect shown", "target met")
    from trainer.learn import Gate, decide

    promoted, reason = decide({"states": doc, "forgetting": {}}, Gate())
    assert not promoted, reason
