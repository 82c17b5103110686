"""Plan mode on a real git repository and SQLite file with the scripted model: what it refuses is
refused when it is called, a plan sent back is a `user` pair, and approval implements the plan."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from agent.approval import ApprovalPolicy
from agent.config import Settings
from agent.plan_mode import PLAN_NOTE, PlanError
from agent.protocol import (
    ModeChanged,
    PlanProposed,
    PlanReviewed,
    ReviewPlan,
    SetMode,
    ToolCallFinished,
    TurnStarted,
    UserInput,
    op_from_dict,
)
from agent.runtime import open_session
from feedback_store import attach, open_store
from feedback_store.export.export import export
from tests.conftest import call, git, turn

EDIT = call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Hi"})
PLAN_ONE = "1. Change the greeting in app.py to Hi."
PLAN_TWO = "1. Change the greeting in app.py to Howdy.\n2. Delete old.txt."


def refused_calls():
    return [
        turn(call("read_file", {"path": "app.py"}), content="Looking first."),
        turn(EDIT, call("run_command", {"command": "echo ran > ran.txt"}), call("delete_file", {"path": "old.txt"})),
        turn(call("move_file", {"src": "util.py", "dst": "utils.py"})),
    ]


def recorded(git_repo, tmp_path, model, approval="plan"):
    settings = Settings(model=model, approval=approval, repo_map_tokens=0, lessons=False, db=str(tmp_path / "f.db"))
    session = open_session(git_repo, settings)
    store = open_store(tmp_path / "f.db")
    recording = attach(session, store)
    events = []
    session.subscribe(events.append)
    return session, store, recording, events


def test_plan_mode_refuses_what_writes_or_runs_whatever_the_rules():
    plan = ApprovalPolicy("plan", allow=("echo*",), allow_tools=("mcp__docs__*",))
    assert plan.decide("read") == plan.decide("finish") == "allow"
    assert plan.decide("edit") == "deny"
    assert plan.decide("command", "echo hi") == "deny"  # an allow rule does not let a command run
    assert plan.decide("call", tool="mcp__docs__search") == "allow"
    assert plan.decide("call", tool="mcp__github__push") == "deny"
    assert "plan mode" in plan.refusal("edit") and "final answer" in plan.refusal("command")


def test_edits_commands_deletes_and_moves_are_refused_and_recorded_and_the_answer_is_the_plan(
    git_repo, script, tmp_path
):
    model = script(*refused_calls(), turn(content=PLAN_ONE))
    session, store, recording, events = recorded(git_repo, tmp_path, model)
    before = git(git_repo, "status", "--porcelain")
    finished = asyncio.run(session.run(UserInput(text="greet with Hi")))

    assert finished.reason == "answered"
    results = {e.name: e for e in events if isinstance(e, ToolCallFinished)}
    assert results["read_file"].ok  # reads work
    for name in ("edit_file", "run_command", "delete_file", "move_file"):
        assert results[name].error_kind == "denied" and "plan mode" in results[name].result
    assert git(git_repo, "status", "--porcelain") == before  # nothing on disk changed
    assert not (git_repo / "ran.txt").exists() and (git_repo / "old.txt").exists()
    assert "Hello" in (git_repo / "app.py").read_text()
    started = next(e for e in events if isinstance(e, TurnStarted))
    assert started.text == "greet with Hi" and started.message["content"].endswith(PLAN_NOTE)
    proposed = [e for e in events if isinstance(e, PlanProposed)]
    assert [p.plan for p in proposed] == [PLAN_ONE] and session.plans.pending == proposed[0]

    recording.close()
    refused = {p.tool: p for p in store.pairs() if p.error_kind == "denied"}
    assert sorted(refused) == ["delete_file", "edit_file", "move_file", "run_command"]
    assert all(p.source == "tool" and "plan mode" in p.feedback for p in refused.values())
    store.close()


def test_a_plan_sent_back_is_a_user_pair_and_approval_implements_it(git_repo, script, tmp_path):
    model = script(
        turn(content=PLAN_ONE),
        turn(content=PLAN_TWO),
        turn(call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Howdy"})),
        turn(call("delete_file", {"path": "old.txt"})),
        turn(call("finish", {"summary": "greeting changed, old.txt deleted"})),
    )
    session, store, recording, events = recorded(git_repo, tmp_path, model)

    async def scenario():
        await session.run(UserInput(text="greet differently"))
        revised = await session.submit(ReviewPlan(approved=False, comment="Use Howdy, and old.txt must go"))
        assert revised.reason == "answered" and session.plans.pending.plan == PLAN_TWO
        done = await session.submit(ReviewPlan(approved=True, mode="auto-edit"))
        await session.close()
        return done

    done = asyncio.run(scenario())
    assert done.reason == "finished"
    assert "Howdy" in (git_repo / "app.py").read_text() and not (git_repo / "old.txt").exists()
    reviews = [e for e in events if isinstance(e, PlanReviewed)]
    assert [(r.approved, r.mode) for r in reviews] == [(False, "plan"), (True, "auto-edit")]
    changed = [e for e in events if isinstance(e, ModeChanged)]
    assert [(c.previous, c.mode) for c in changed] == [("plan", "auto-edit")]
    third = [e for e in events if isinstance(e, TurnStarted)][2]
    assert not third.message["content"].endswith(PLAN_NOTE)  # the implementation turn is not planning

    recording.close()
    (pair,) = [p for p in store.pairs() if p.source == "user"]
    assert pair.error_kind == "plan_sent_back"
    assert pair.completion["content"] == PLAN_ONE
    assert "Use Howdy, and old.txt must go" in pair.feedback
    assert pair.correction is not None and pair.correction["content"] == PLAN_TWO
    store.close()
    # the next plan is what the plan should have been: every format that trains on a correction has it
    for fmt in ("sdpo", "dpo", "sft"):
        export([tmp_path / "f.db"], fmt, tmp_path / f"{fmt}.jsonl", source="user", tokenizer="estimate")
    (sdpo,) = [json.loads(line) for line in (tmp_path / "sdpo.jsonl").read_text().splitlines()]
    assert sdpo["error_kind"] == "plan_sent_back" and sdpo["correction"]["content"] == PLAN_TWO
    (dpo,) = [json.loads(line) for line in (tmp_path / "dpo.jsonl").read_text().splitlines()]
    assert dpo["chosen"] == [{"role": "assistant", "content": PLAN_TWO}]
    assert dpo["rejected"] == [{"role": "assistant", "content": PLAN_ONE}]


def test_a_message_in_plan_mode_sends_the_plan_back_and_set_mode_approves_it(git_repo, script, tmp_path):
    model = script(turn(content=PLAN_ONE), turn(content=PLAN_TWO), turn(EDIT))
    session, store, recording, events = recorded(git_repo, tmp_path, model)

    async def scenario():
        await session.run(UserInput(text="greet differently"))
        await session.run(UserInput(text="not that, say Howdy"))  # still in plan mode: the reason
        changed = await session.submit(SetMode(mode="full-auto"))
        assert changed.mode == "full-auto"
        await session.run(UserInput(text="go ahead"))
        await session.close()

    asyncio.run(scenario())
    reviews = [(e.approved, e.comment, e.mode) for e in events if isinstance(e, PlanReviewed)]
    assert reviews == [(False, "not that, say Howdy", "plan"), (True, None, "full-auto")]
    assert "Hi" in (git_repo / "app.py").read_text()
    recording.close()
    (pair,) = [p for p in store.pairs() if p.source == "user"]
    assert pair.correction["content"] == PLAN_TWO
    store.close()


def test_wrong_verdicts_are_clear_errors(git_repo, script, tmp_path):
    session, store, recording, _ = recorded(git_repo, tmp_path, script(turn(content=PLAN_ONE)))

    async def scenario():
        with pytest.raises(PlanError, match="no plan is waiting"):
            await session.submit(ReviewPlan(approved=True))
        await session.run(UserInput(text="plan it"))
        with pytest.raises(PlanError, match="say why"):
            await session.submit(ReviewPlan(approved=False, comment="  "))
        with pytest.raises(PlanError, match="not 'plan'"):
            await session.submit(ReviewPlan(approved=True, mode="plan"))
        with pytest.raises(ValueError, match="unknown approval mode"):
            await session.submit(SetMode(mode="yolo"))
        assert session.plans.pending is not None  # nothing above reviewed it
        await session.close()

    asyncio.run(scenario())
    recording.close()
    store.close()
    verdict = ReviewPlan(approved=False, comment="x")
    assert op_from_dict(verdict.to_dict()) == verdict  # it crosses to a worker process as it is


def test_the_cli_plans_takes_the_reason_then_approval_and_the_edits_land(git_repo, script, teachback_home):
    model = script(
        turn(EDIT),
        turn(call("run_command", {"command": "echo ran > ran.txt"})),
        turn(content=PLAN_ONE),
        turn(content=PLAN_TWO),
        turn(call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Howdy"})),
        turn(call("finish", {"summary": "done"})),
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "run",
            "--workspace",
            str(git_repo),
            "--model",
            model,
            "--approval",
            "plan",
            "greet",
        ],
        input="r\nsay Howdy instead\na\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("Approve the plan?") == 2
    assert (
        "plan sent back: say Howdy instead" in done.stdout and "plan approved (continuing in auto-edit)" in done.stdout
    )
    assert "Howdy" in (git_repo / "app.py").read_text() and not (git_repo / "ran.txt").exists()
    store = open_store(teachback_home / "feedback.db")
    pairs = store.pairs()
    assert {(p.source, p.tool, p.error_kind) for p in pairs} >= {
        ("tool", "edit_file", "denied"),
        ("tool", "run_command", "denied"),
        ("user", None, "plan_sent_back"),
    }
    store.close()


def test_the_language_server_takes_plan_as_its_approval_option(git_repo):
    from lsp_server.options import resolve_options

    resolved = resolve_options({"approval": "plan"}, git_repo)
    assert resolved.problems == () and resolved.options.settings.approval == "plan"
    wrong = resolve_options({"approval": 3}, git_repo)
    assert '"plan"' in wrong.problems[0] and wrong.options.settings.approval == "ask"
