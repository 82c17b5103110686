"""The session and state replay label a call alike: scripted task attempts whose replies hit every
label the replay can give are recorded, then each recorded reply is drawn again from the same
scripted model at its state and labelled by the replay; every label must be what the session
recorded."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tasks.rollout import run_attempt
from tasks.sample_suite import sample_suite_path
from tasks.states import Label, Sampler, Scratch, label_reply, load_states
from tests.conftest import call, turn
from tests.tasks.test_rollout import RESTORE, SOLVES, sample_task, spec

WORDZ = {"path": "textkit/wordz.py"}
# One call a step, in the order the session runs them; the label each one must get.
EVERY_KIND = [
    (turn(call("read_file", {"path": "textkit/words.py"})), "ok"),
    (turn(call("read_file", {"path": "textkit/words.py"})), "repeated_call"),
    (turn(call("read_file", WORDZ)), "not_found"),
    (turn(call("list_files", {"path": "textkit/wordz"})), "not_found"),
    (turn(call("read_file", WORDZ)), "repeated_cycle"),  # the same failure two calls ago, nothing changed
    (turn(call("read_file", {"path": "../outside.py"})), "outside_workspace"),
    (turn(call("edit_file", {**RESTORE, "old_text": "raise Nope"})), "no_match"),
    (turn(call("edit_file", {**RESTORE, "old_text": "text"})), "ambiguous"),
    (turn(call("read_file", {"file": "textkit/words.py"})), "bad_arguments"),
    (turn(call("grep", {"pattern": "word"})), "unknown_tool"),
    (turn(call("read_file", '{"path": ')), "malformed_json"),
    (turn(call("run_command", {"command": "curl -s https://example.com/x"})), "denied"),  # a deny rule
    (turn(call("run_command", {"command": "echo asked"})), "denied"),  # asked, and nobody answers
    (turn(call("run_command", {"command": "no-such-program --x"})), "cannot_run"),
    (turn(call("run_command", {"command": "python -m pytest -q -x"})), "failing_test"),
    (turn(call("create_file", {"path": "notes.txt", "content": "seen\n"})), "ok"),
    (turn(call("read_file", {"path": "textkit/words.py"})), "ok"),  # an edit since the first read
    (turn(call("finish", {"summary": "done"})), "premature_finish"),
]
MALFORMED = [turn(content='<tool_call>{"name": "read_file", "arguments": {"path": </tool_call>')]


def recorded(script, tmp_path: Path, name: str, turns: list[dict], **overrides) -> list:
    """The states of one scripted attempt, recorded to its own database."""
    db = tmp_path / f"{name}.db"
    model = script(*turns, name=f"{name}.json")
    settings = {"ask_commands": ["echo *"], **overrides}
    record = run_attempt(spec(model, db, work_dir=str(tmp_path / name), overrides=settings))
    assert "error" not in record, record
    return [(state, model) for state in load_states(db)]


def replayed(state, model: str) -> Label:
    """The recorded reply drawn again at its state and labelled by the replay."""
    task = sample_task(state.task_id)
    scratch = Scratch(state, task, sample_suite_path())
    try:
        reply = asyncio.run(Sampler(model).sample(state, 0))
        return asyncio.run(label_reply(state, reply, scratch.copy("r"), task, sample_suite_path()))
    finally:
        scratch.close()


@pytest.mark.timeout(600)
def test_the_replay_gives_every_recorded_call_the_label_the_session_gave_it(script, tmp_path: Path) -> None:
    states = [
        *recorded(script, tmp_path, "kinds", [t for t, _ in EVERY_KIND]),
        *recorded(script, tmp_path, "solves", SOLVES),
        *recorded(script, tmp_path, "text", MALFORMED, tool_mode="text"),
    ]
    session = [state.recorded.kind for state, _ in states]
    wanted = [kind for _, kind in EVERY_KIND] + ["ok", "ok", "finished", "malformed_call", "answer"]
    assert session == wanted  # the script hits every kind, as the session labels it
    replay = [replayed(state, model) for state, model in states]
    assert [(label.kind, label.tools) for label in replay] == [(s.recorded.kind, s.recorded.tools) for s, _ in states]
    # the call errors are keyed as the session's pairs key them: tool, kind and the target it named
    failures = [label.failures for label in replay]
    assert failures[2] == (("read_file", "not_found", "textkit/wordz.py"),)
    assert failures[11] == (("run_command", "denied", "curl -s https://example.com/x"),)
    assert not failures[0] and not failures[-3]  # ok and finished name no failure
