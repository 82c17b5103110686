"""Approval modes and rules, checkpoints and undo."""

from __future__ import annotations

import asyncio

from agent.approval import ApprovalPolicy
from agent.checkpoint import REF, undo_last
from agent.config import Settings
from agent.protocol import (
    ApprovalDecision,
    ApprovalRequested,
    ApprovalResolved,
    CorrectEdit,
    ReviewFile,
    ToolCallFinished,
    Undo,
    UserInput,
)
from agent.runtime import open_session
from tests.conftest import call, git, turn


def test_policy_modes_and_rules():
    ask = ApprovalPolicy("ask")
    assert (ask.decide("read"), ask.decide("edit"), ask.decide("command", "ls")) == ("allow", "ask", "ask")
    auto_edit = ApprovalPolicy("auto-edit")
    assert (auto_edit.decide("edit"), auto_edit.decide("command", "ls")) == ("allow", "ask")
    full = ApprovalPolicy("full-auto", deny=("rm *",), ask=("git push*",))
    assert full.decide("command", "pytest -q") == "allow"
    assert full.decide("command", "rm -rf /") == "deny"
    assert full.decide("command", "git push origin main") == "ask"
    read_only = ApprovalPolicy("read-only", allow=("pytest*",))
    assert read_only.decide("edit") == "deny"
    assert read_only.decide("command", "pytest -q") == "allow"
    assert read_only.decide("command", "make") == "deny"
    both = ApprovalPolicy("full-auto", allow=("git *",), deny=("git push*",))
    assert both.decide("command", "git push") == "deny"  # deny wins


async def _answering(session, answers):
    """Answer approval requests in order with (approved, comment) pairs, like a frontend would."""
    queue = list(answers)

    def on_event(event):
        if isinstance(event, ApprovalRequested):
            approved, comment = queue.pop(0)
            asyncio.get_running_loop().call_soon(
                lambda: asyncio.ensure_future(
                    session.submit(ApprovalDecision(request_id=event.request_id, approved=approved, comment=comment))
                )
            )

    session.subscribe(on_event)


async def test_ask_mode_waits_for_the_user_and_a_refusal_changes_nothing(git_repo, script):
    model = script(
        turn(call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Howdy"})),
        turn(call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Hi"})),
        turn(call("run_command", {"command": "echo ran > ran.txt"})),
    )
    session = open_session(git_repo, Settings(model=model, approval="ask"))
    events = []
    session.subscribe(events.append)
    await _answering(session, [(False, "use Hi, not Howdy"), (True, None), (False, None)])
    finished = await session.run(UserInput(text="greet differently"))
    requests = [e for e in events if isinstance(e, ApprovalRequested)]
    assert [r.action for r in requests] == ["edit", "edit", "command"]
    assert "-    return 'Hello, ' + name" in requests[0].detail and "+    return 'Howdy, ' + name" in requests[0].detail
    results = [e for e in events if isinstance(e, ToolCallFinished)]
    assert results[0].error_kind == "denied" and "use Hi, not Howdy" in results[0].result
    assert results[1].ok
    assert results[2].error_kind == "denied"
    assert [e.approved for e in events if isinstance(e, ApprovalResolved)] == [False, True, False]
    assert "'Hi, '" in (git_repo / "app.py").read_text()
    assert not (git_repo / "ran.txt").exists()
    assert finished.reason == "answered"


async def test_a_denial_quotes_the_reason_as_a_sentence(git_repo, script):
    model = script(
        turn(call("run_command", {"command": "echo one"})),
        turn(call("run_command", {"command": "echo two"})),
        turn(call("run_command", {"command": "echo three"})),
    )
    session = open_session(git_repo, Settings(model=model, approval="ask"))
    events = []
    session.subscribe(events.append)
    await _answering(session, [(False, "do not run echo "), (False, "Never!"), (False, None)])
    await session.run(UserInput(text="say things"))
    assert [e.result for e in events if isinstance(e, ToolCallFinished)] == [
        "The user declined this command; nothing was changed. Their reason: do not run echo. "
        "Adjust your approach accordingly.",
        "The user declined this command; nothing was changed. Their reason: Never! Adjust your approach accordingly.",
        "The user declined this command; nothing was changed. Adjust your approach accordingly.",
    ]


async def test_read_only_refuses_edits(git_repo, script, run_agent):
    model = script(turn(call("create_file", {"path": "new.py", "content": "x = 1\n"})))
    run = await run_agent(git_repo, model, approval="read-only")
    result = run.of(ToolCallFinished)[0]
    assert result.error_kind == "denied" and "read-only" in result.result
    assert not (git_repo / "new.py").exists()


async def test_undo_restores_the_tree_and_leaves_branch_and_index_alone(git_repo, script, run_agent):
    (git_repo / "staged.py").write_text("staged = 1\n")
    git(git_repo, "add", "staged.py")
    (git_repo / "scratch.txt").write_text("user's untracked notes\n")
    index_before = git(git_repo, "diff", "--cached", "--name-status")
    head_before = git(git_repo, "rev-parse", "HEAD")
    model = script(
        turn(
            call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Bye"}),
            call("create_file", {"path": "added.py", "content": "new = 1\n"}),
            call("delete_file", {"path": "scratch.txt"}),
            call("move_file", {"src": "util.py", "dst": "lib/util.py"}),
        )
    )
    await run_agent(git_repo, model)
    assert not (git_repo / "util.py").exists() and (git_repo / "added.py").exists()
    assert git(git_repo, "rev-parse", "--verify", REF)

    restored = undo_last(git_repo)

    assert set(restored) == {"app.py", "added.py", "scratch.txt", "util.py", "lib/util.py"}
    assert "Hello" in (git_repo / "app.py").read_text()
    assert not (git_repo / "added.py").exists() and not (git_repo / "lib" / "util.py").exists()
    assert (git_repo / "scratch.txt").read_text() == "user's untracked notes\n"
    assert (git_repo / "util.py").exists()
    assert git(git_repo, "rev-parse", "HEAD") == head_before
    assert git(git_repo, "symbolic-ref", "HEAD") == "refs/heads/main"
    assert git(git_repo, "diff", "--cached", "--name-status") == index_before
    assert git(git_repo, "stash", "list") == ""
    assert git(git_repo, "for-each-ref", REF) == ""  # popped


async def test_undo_pops_one_turn_at_a_time(git_repo, script):
    model = script(
        turn(call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "One"})),
        turn(call("finish", {"summary": "1"})),
        turn(call("edit_file", {"path": "app.py", "old_text": "One", "new_text": "Two"})),
        turn(call("finish", {"summary": "2"})),
    )
    session = open_session(git_repo, Settings(model=model, approval="full-auto"))
    await session.run(UserInput(text="first"))
    await session.run(UserInput(text="second"))
    assert "Two" in (git_repo / "app.py").read_text()
    assert (await session.submit(Undo())).paths == ["app.py"]
    assert "One" in (git_repo / "app.py").read_text()
    await session.submit(Undo())
    assert "Hello" in (git_repo / "app.py").read_text()


async def test_undo_outside_git_uses_the_journal(tmp_path, script, run_agent):
    root = tmp_path / "plain"
    root.mkdir()
    (root / "notes.md").write_text("original\n")
    model = script(
        turn(
            call("edit_file", {"path": "notes.md", "old_text": "original", "new_text": "changed"}),
            call("create_file", {"path": "extra.md", "content": "x\n"}),
        )
    )
    await run_agent(root, model)
    assert (root / "notes.md").read_text() == "changed\n"
    assert sorted(undo_last(root)) == ["extra.md", "notes.md"]
    assert (root / "notes.md").read_text() == "original\n" and not (root / "extra.md").exists()


async def test_review_rejects_a_file_and_accepts_another(git_repo, script, run_agent):
    model = script(
        turn(
            call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Yo"}),
            call("create_file", {"path": "notes.txt", "content": "n\n"}),
        )
    )
    run = await run_agent(git_repo, model)
    rejected = await run.session.submit(ReviewFile(path="app.py", accepted=False, comment="keep Hello"))
    accepted = await run.session.submit(ReviewFile(path="notes.txt", accepted=True))
    assert rejected.decision == "rejected" and rejected.comment == "keep Hello"
    assert "Hello" in (git_repo / "app.py").read_text()
    assert accepted.decision == "accepted" and (git_repo / "notes.txt").exists()
    corrected = await run.session.submit(CorrectEdit(path="notes.txt", user_content="n\nmore\n"))
    assert corrected is not None and corrected.decision == "corrected" and corrected.user_content == "n\nmore\n"


async def test_undo_also_restores_files_gitignore_hides(git_repo, script, run_agent):
    (git_repo / "debug.log").write_text("kept log\n")  # *.log is ignored in this repository
    model = script(
        turn(
            call("edit_file", {"path": "debug.log", "old_text": "kept", "new_text": "clobbered"}),
            call("create_file", {"path": "new.log", "content": "fresh\n"}),
            call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Bye"}),
        )
    )
    await run_agent(git_repo, model)
    assert (git_repo / "debug.log").read_text() == "clobbered log\n"
    restored = undo_last(git_repo)
    assert restored == ["app.py", "debug.log", "new.log"]
    assert (git_repo / "debug.log").read_text() == "kept log\n"
    assert not (git_repo / "new.log").exists()
    assert "Hello" in (git_repo / "app.py").read_text()
