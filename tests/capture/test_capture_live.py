"""Claude Code's and Codex's hook payloads (tests/capture/payloads, built from their published hook
documentation) piped through the command `teachback hooks install` wrote, as the host runs it."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import time
from pathlib import Path

import pytest

from feedback_store.store import open_store
from tests.capture.hooks_run import installed_command, payloads, run_hook, teachback, wait_for

# Each test runs a dozen hook processes and waits for the turn's recording in the background: on
# two busy cores that can take minutes.
pytestmark = pytest.mark.timeout(400)
CLAUDE_SESSION = "claude-code-4f8e2a1c-1b7d-4c55-9a60-2f0d3c9e7a11"
PAIR = "SELECT source, error_kind, target, correction_call_id, feedback FROM pairs WHERE session_id = ?"


def _install(repo: Path, agent: str, *flags: str) -> Path:
    done = teachback("hooks", "install", agent, "--project", *flags, cwd=repo)
    assert done.returncode == 0, done.stderr
    return repo / (".claude/settings.json" if agent == "claude-code" else ".codex/hooks.json")


def _pipe(settings: Path, repo: Path, calls: list[dict]) -> list[float]:
    times = []
    for payload in calls:
        done, seconds = run_hook(installed_command(settings, payload["hook_event_name"]), payload, repo)
        assert done.returncode == 0, done.stderr
        assert done.stdout == b"", done.stdout  # nothing the host would act on
        times.append(seconds)
    return times


def test_a_failing_call_then_a_fixed_one_is_a_pair_with_the_fix_as_correction(git_repo, teachback_home):
    settings = _install(git_repo, "claude-code")
    _pipe(settings, git_repo, payloads("claude_code_fail_then_fix.jsonl", git_repo, git_repo / "missing.jsonl"))

    # Recorded in the background after Stop; the transcript it names does not exist.
    rows = wait_for(teachback_home / "feedback.db", PAIR, (CLAUDE_SESSION,))
    assert [r[:4] for r in rows] == [("tool", "not_found", f"{git_repo}/src/app.py", "toolu_01B2fix")]
    assert "File does not exist" in rows[0][4]


def test_codex_failing_command_then_the_fixed_one_is_a_pair(git_repo, teachback_home):
    settings = _install(git_repo, "codex")
    _pipe(settings, git_repo, payloads("codex_fail_then_fix.jsonl", git_repo, git_repo / "missing.jsonl"))

    session = "codex-0199a3c2-7d41-7b20-9e55-3c1f2a8b4d67"
    rows = wait_for(teachback_home / "feedback.db", PAIR, (session,))
    assert [r[:4] for r in rows] == [("tool", "exit_status", "pytset -q", "call_8Lr2")]
    said = wait_for(
        teachback_home / "feedback.db",
        "SELECT model FROM sessions WHERE id = ? AND frontend = 'codex'",
        (session,),
    )
    assert said == [("gpt-5-codex",)]


@pytest.mark.parametrize(
    ("agent", "session"),
    [
        ("claude-code", "claude-code-9b1d7e3a-55c2-4e0f-8d21-6a4f0b2c8e90"),
        ("codex", "codex-0199a3c2-9e10-7c31-8a42-5d2e3f4a6b78"),
    ],
)
def test_a_denied_call_and_the_next_prompt_are_a_user_pair(git_repo, teachback_home, agent, session):
    settings = _install(git_repo, agent)
    name = f"{agent.replace('-', '_')}_denial.jsonl"
    _pipe(settings, git_repo, payloads(name, git_repo, git_repo / "missing.jsonl"))

    rows = wait_for(teachback_home / "feedback.db", PAIR, (session,))
    assert [r[:3] for r in rows] == [("user", "denied", f"rm -rf {git_repo}/*.txt")]
    assert "use git rm old.txt so it can be undone" in rows[0][4]
    asked = wait_for(
        teachback_home / "feedback.db", "SELECT approved, comment FROM approvals WHERE session_id = ?", (session,)
    )
    assert asked == [(0, "No, never rm -rf here: use git rm old.txt so it can be undone")]


def test_a_locked_database_queues_at_once_and_the_events_arrive_later(git_repo, teachback_home):
    db = teachback_home / "feedback.db"
    open_store(db).close()
    settings = _install(git_repo, "claude-code")
    calls = payloads("claude_code_fail_then_fix.jsonl", git_repo, git_repo / "missing.jsonl")
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process writing, for as long as it likes
    try:
        times = _pipe(settings, git_repo, calls)
        queue = db.with_name(db.name + ".hook-queue")
        assert len(list(queue.glob("*.json"))) == len(calls)
        assert max(times) < 5, times  # a hook that waited for the lock would wait the store's 30 s
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert not sqlite3.connect(db).execute("SELECT count(*) FROM pairs").fetchone()[0]

    # The host's next hook call finds the database free: the queue goes in first, then its own.
    _pipe(settings, git_repo, calls[-1:])
    rows = wait_for(db, PAIR, (CLAUDE_SESSION,))
    assert [r[3] for r in rows] == ["toolu_01B2fix"]
    assert not list(queue.glob("*.json"))


def test_any_command_that_opens_the_store_takes_the_queue(git_repo, teachback_home):
    db = teachback_home / "feedback.db"
    open_store(db).close()
    settings = _install(git_repo, "claude-code")
    calls = payloads("claude_code_fail_then_fix.jsonl", git_repo, git_repo / "missing.jsonl")[:2]
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        _pipe(settings, git_repo, calls)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    queue = db.with_name(db.name + ".hook-queue")
    assert len(list(queue.glob("*.json"))) == 2

    assert teachback("lessons", cwd=git_repo).returncode == 0  # opens the store to write (it distils)
    assert not list(queue.glob("*.json"))
    arrived = sqlite3.connect(db).execute(
        "SELECT json_extract(payload, '$.hook_event_name') FROM hook_inbox ORDER BY ts"
    )
    assert [r[0] for r in arrived] == ["UserPromptSubmit", "PreToolUse"]


def test_guard_denies_a_call_this_repositorys_lessons_know_fails(git_repo, teachback_home):
    db = teachback_home / "feedback.db"
    settings = _install(git_repo, "claude-code")
    _pipe(settings, git_repo, payloads("claude_code_fail_then_fix.jsonl", git_repo, git_repo / "missing.jsonl"))
    wait_for(db, "SELECT id FROM lessons WHERE tool = 'Read' AND error_kind = 'not_found' AND corrected > 0")

    settings = _install(git_repo, "claude-code", "--guard")
    command = installed_command(settings, "PreToolUse")
    assert command.endswith("capture claude-code --guard")
    later = {"session_id": "later-session", "transcript_path": str(git_repo / "none.jsonl"), "cwd": str(git_repo)}
    known = {**later, "hook_event_name": "PreToolUse", "tool_name": "Read", "tool_use_id": "toolu_again"}
    done, _ = run_hook(command, {**known, "tool_input": {"file_path": f"{git_repo}/src/app.py"}}, git_repo)
    assert done.returncode == 0
    answer = json.loads(done.stdout)["hookSpecificOutput"]
    assert answer["hookEventName"] == "PreToolUse" and answer["permissionDecision"] == "deny"
    lesson = sqlite3.connect(db).execute("SELECT text FROM lessons WHERE tool = 'Read'").fetchone()[0]
    assert answer["permissionDecisionReason"] == f"teachback learned in this repository that this call fails: {lesson}"

    fine = {**known, "tool_use_id": "toolu_fine", "tool_input": {"file_path": f"{git_repo}/app.py"}}
    done, _ = run_hook(command, fine, git_repo)
    assert done.returncode == 0 and done.stdout == b""  # a call nothing is known against goes ahead

    # The denial is recorded like any hook decision: a denied call of that session.
    run_hook(installed_command(settings, "Stop"), {**later, "hook_event_name": "Stop"}, git_repo)
    denied = wait_for(
        db,
        "SELECT error_kind, result FROM tool_calls WHERE session_id = 'claude-code-later-session' AND call_id = ?",
        ("toolu_again",),
    )
    assert denied[0][0] == "denied" and "teachback learned" in denied[0][1]


def test_the_transcript_adds_only_what_live_capture_missed(git_repo, teachback_home):
    settings = _install(git_repo, "claude-code")
    transcript = git_repo / "transcript.jsonl"
    calls = payloads("claude_code_fail_then_fix.jsonl", git_repo, transcript)
    lines = {  # what Claude Code writes, at the time, before each hook runs (the importer's line shapes)
        1: lambda: [_reply("Let me read the app module.", ("toolu_01A1fail", f"{git_repo}/src/app.py"))],
        3: lambda: [
            _result("toolu_01A1fail", "File does not exist.", True),
            _reply("", ("toolu_01B2fix", f"{git_repo}/app.py")),
        ],
        4: lambda: [_result("toolu_01B2fix", "def greet(name): ...", False)],
        5: lambda: [_reply("greet joins 'Hello, ' and the name.")],
    }
    for index, payload in enumerate(calls):
        with transcript.open("a", encoding="utf-8") as out:
            out.writelines(json.dumps(line) + "\n" for line in lines.get(index, list)())
        _pipe(settings, git_repo, [payload])
        time.sleep(0.01)

    db = teachback_home / "feedback.db"
    wait_for(db, PAIR, (CLAUDE_SESSION,))
    said = wait_for(
        db,
        "SELECT message FROM messages WHERE session_id = ? AND role = 'assistant' AND message LIKE '%greet joins%'",
        (CLAUDE_SESSION,),
    )
    assert said
    calls_seen = sqlite3.connect(db).execute(
        "SELECT call_id FROM tool_calls WHERE session_id = ? ORDER BY started_at", (CLAUDE_SESSION,)
    )
    assert [r[0] for r in calls_seen] == ["toolu_01A1fail", "toolu_01B2fix"]  # none twice
    first = sqlite3.connect(db).execute(
        "SELECT message FROM messages WHERE session_id = ? AND role = 'assistant' ORDER BY seq LIMIT 1",
        (CLAUDE_SESSION,),
    )
    message = json.loads(first.fetchone()[0])
    assert message["content"] == "Let me read the app module."
    assert [c["id"] for c in message["tool_calls"]] == ["toolu_01A1fail"]


def test_hostile_payloads_change_nothing_and_the_hook_still_succeeds(git_repo, teachback_home):
    settings = _install(git_repo, "claude-code")
    command = installed_command(settings, "PreToolUse")
    for payload in (b"", b"[1, 2]", b"not json", b"[" * 100_000, b'{"hook_event_name": ' + b"[" * 50_000):
        done, seconds = run_hook(command, payload, git_repo)
        assert done.returncode == 0 and done.stdout == b""
        assert b"Traceback" not in done.stderr and seconds < 30
    assert not (teachback_home / "feedback.db").exists()


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _line(kind: str, message: dict) -> dict:
    session = "4f8e2a1c-1b7d-4c55-9a60-2f0d3c9e7a11"
    return {"type": kind, "sessionId": session, "cwd": "/nowhere", "timestamp": _now(), "message": message}


def _reply(text: str, *calls: tuple[str, str]) -> dict:
    content = [{"type": "text", "text": text}] if text else []
    content += [{"type": "tool_use", "id": i, "name": "Read", "input": {"file_path": p}} for i, p in calls]
    message = {
        "id": f"msg_{time.monotonic_ns()}",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": content,
    }
    return _line("assistant", message)


def _result(call_id: str, text: str, error: bool) -> dict:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": text, "is_error": error}
    return _line("user", {"role": "user", "content": [block]})
