"""Hooks in Claude Code's format around teachback's own calls, with real hook commands: exit 2 and
JSON decisions (deny, ask, allow, a rewrite), a hook that hangs, a workspace's hooks withheld until
allowed, and the other events (PostToolUse, UserPromptSubmit, SessionStart, Stop)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agent.protocol import ApprovalRequested, ErrorEvent, HookRan, SessionStarted, ToolCallFinished, ToolCallStarted
from cli.entry import main
from feedback_store import open_store
from tests.agent.hooks_helpers import claude_settings, hook_script, run_session, toml_hooks
from tests.conftest import call, turn

pytestmark = pytest.mark.timeout(120)

DECIDE = """
command = event["tool_input"].get("command", "")
if event["tool_name"] == "read_file":
    decision = "ask"
else:
    decision = "deny" if "denied" in command else "allow"
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": decision,
                  "permissionDecisionReason": f"the {decision} hook says so"}}))
"""


def user_toml(home):
    return home / "teachback.toml"


async def test_exit_2_blocks_the_call_and_the_model_reads_the_reason(git_repo, script, teachback_home, tmp_path):
    block = hook_script(
        tmp_path, "block", 'sys.stderr.write("no network tools here; use the vendored copy"); sys.exit(2)'
    )
    toml_hooks(user_toml(teachback_home), "PreToolUse", "run_command", block)
    ran = await run_session(git_repo, script(turn(call("run_command", {"command": "touch ran.txt"}))))
    [finished] = ran.of(ToolCallFinished)
    assert finished.error_kind == "denied" and not (git_repo / "ran.txt").exists()
    assert "no network tools here; use the vendored copy" in finished.message["content"]
    assert finished.result.startswith("A hook blocked this run_command call; nothing was run.")
    [hook] = ran.of(HookRan)
    assert (hook.decision, hook.exit_code, hook.call_id) == ("deny", 2, finished.call_id)


async def test_json_allow_skips_asking_deny_refuses_and_ask_asks(git_repo, script, teachback_home, tmp_path):
    decide = hook_script(tmp_path, "decide", DECIDE)
    toml_hooks(user_toml(teachback_home), "PreToolUse", "run_command|read_file", decide)
    model = script(
        turn(call("run_command", {"command": "echo ok > allowed.txt"})),
        turn(call("run_command", {"command": "echo no > denied.txt"})),
        turn(call("read_file", {"path": "app.py"})),
    )
    # auto-edit asks before every command; the hook's allow answers for the user, its ask asks about a read.
    ran = await run_session(git_repo, model, approval="auto-edit", answers=[(True, None)])
    allowed, denied, read = ran.of(ToolCallFinished)
    assert allowed.ok and (git_repo / "allowed.txt").exists()
    assert denied.error_kind == "denied" and not (git_repo / "denied.txt").exists()
    assert "the deny hook says so" in denied.message["content"]
    [asked] = ran.of(ApprovalRequested)
    assert asked.call_id == read.call_id and read.ok and "Hello" in read.result


async def test_ask_from_a_hook_declined_by_the_user_is_refused(git_repo, script, teachback_home, tmp_path):
    toml_hooks(user_toml(teachback_home), "PreToolUse", "read_file", hook_script(tmp_path, "decide", DECIDE))
    ran = await run_session(
        git_repo, script(turn(call("read_file", {"path": "app.py"}))), answers=[(False, "not that file")]
    )
    [read] = ran.of(ToolCallFinished)
    assert read.error_kind == "denied" and "not that file" in read.result


async def test_a_rewrite_runs_as_rewritten_and_a_broken_one_is_a_tool_error(git_repo, script, teachback_home, tmp_path):
    rewrite = hook_script(
        tmp_path,
        "rewrite",
        """
command = event["tool_input"]["command"]
new = {"command": command.replace("sent", "run")} if "good" in command else {"cmd": command}
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": new}}))
""",
    )
    toml_hooks(user_toml(teachback_home), "PreToolUse", "run_command", rewrite)
    model = script(
        turn(call("run_command", {"command": "echo sent > good.txt"})),
        turn(call("run_command", {"command": "echo sent > bad.txt"})),
    )
    ran = await run_session(git_repo, model)
    good, bad = ran.of(ToolCallFinished)
    assert good.ok and (git_repo / "good.txt").read_text().strip() == "run"
    started = ran.of(ToolCallStarted)[0]
    assert json.loads(started.arguments) == {"command": "echo sent > good.txt"}  # the call as sent
    assert ran.of(HookRan)[0].updated_input == {"command": "echo run > good.txt"}  # and as run
    assert bad.error_kind == "bad_arguments" and not (git_repo / "bad.txt").exists()
    assert "A hook rewrote this run_command call" in bad.result and "unknown argument 'cmd'" in bad.result


async def test_a_hook_that_hangs_is_stopped_at_its_timeout_with_its_children(
    git_repo, script, teachback_home, tmp_path
):
    pids = tmp_path / "pids"
    hang = hook_script(
        tmp_path,
        "hang",
        f"""
import subprocess
child = subprocess.Popen(["sleep", "60"])
open({str(pids)!r}, "a").write(f"{{child.pid}}\\n")
time.sleep(60)
""",
    )
    toml_hooks(user_toml(teachback_home), "PreToolUse", "*", hang, timeout=1)
    model = script(
        turn(call("run_command", {"command": "echo 1 > one.txt"})), turn(call("read_file", {"path": "app.py"}))
    )
    clock = time.monotonic()
    ran = await run_session(git_repo, model)
    assert time.monotonic() - clock < 30
    first, second = ran.of(ToolCallFinished)
    assert first.ok and second.ok and (git_repo / "one.txt").exists()  # a timeout is not a deny
    notices = [e for e in ran.of(ErrorEvent) if e.kind == "hook"]
    assert len(notices) == 1 and "did not finish within its 1 s timeout" in notices[0].message  # reported once
    assert [h.problem is not None for h in ran.of(HookRan)] == [True, True]
    assert pids.read_text().split() and not any(alive(int(pid)) for pid in pids.read_text().split())


def alive(pid: int) -> bool:
    """Whether `pid` still runs (a killed child its parent's death left unreaped is a zombie, not alive)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


async def test_garbage_output_is_reported_and_never_taken_as_an_allow(git_repo, script, teachback_home, tmp_path):
    garbage = hook_script(tmp_path, "garbage", 'print("{" * 5000 + "permissionDecision")')
    toml_hooks(user_toml(teachback_home), "PreToolUse", "run_command", garbage)
    model = script(turn(call("run_command", {"command": "echo hi > x.txt"})))
    ran = await run_session(git_repo, model, approval="auto-edit", answers=[(False, None)])
    [finished] = ran.of(ToolCallFinished)
    assert ran.of(ApprovalRequested) and finished.error_kind == "denied"  # the policy still asked
    [notice] = [e for e in ran.of(ErrorEvent) if e.kind == "hook"]
    assert "not a JSON object" in notice.message


async def test_a_workspace_hook_runs_nothing_until_the_user_allows_it(git_repo, script, tmp_path):
    marker, captured = tmp_path / "hook-ran", tmp_path / "capture-ran"
    block = hook_script(
        tmp_path, "ws", f'open({str(marker)!r}, "w").write("x"); print("blocked", file=sys.stderr); sys.exit(2)'
    )
    capture = f"touch {captured} ; teachback capture --agent claude"
    claude_settings(
        git_repo,
        {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": block}]}],
            "PostToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": capture}]}],
        },
    )
    model = script(turn(call("run_command", {"command": "echo hi > hi.txt"})))
    ran = await run_session(git_repo, model)
    assert ran.of(ToolCallFinished)[0].ok and not marker.exists()
    [notice] = [e for e in ran.of(ErrorEvent) if e.kind == "hook"]
    assert "teachback mcp allow --workspace" in notice.message and ".claude/settings.json" in notice.message
    assert main(["mcp", "allow", "--workspace", str(git_repo)]) == 0
    ran = await run_session(
        git_repo, script(turn(call("run_command", {"command": "echo hi > hi2.txt"})), name="2.json")
    )
    [finished] = ran.of(ToolCallFinished)
    assert finished.error_kind == "denied" and marker.exists() and not (git_repo / "hi2.txt").exists()
    assert not captured.exists()  # a hook that runs `teachback capture` is skipped
    # A changed definition is withheld again until allowed again.
    claude_settings(git_repo, {"PreToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": block}]}]})
    ran = await run_session(git_repo, script(turn(call("run_command", {"command": "true"})), name="3.json"))
    assert "changed since you allowed them" in [e for e in ran.of(ErrorEvent) if e.kind == "hook"][0].message


async def test_post_tool_use_and_prompt_hooks_add_what_the_model_reads(git_repo, script, teachback_home, tmp_path):
    home = user_toml(teachback_home)
    toml_hooks(
        home,
        "PostToolUse",
        "read_file",
        hook_script(tmp_path, "post", 'print("remember: app.py is generated", file=sys.stderr); sys.exit(2)'),
    )
    toml_hooks(home, "UserPromptSubmit", "", hook_script(tmp_path, "prompt", 'print("the ticket is BUG-7")'))
    start = json.dumps(
        {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "tests: pytest -q"}}
    )
    toml_hooks(home, "SessionStart", "startup", hook_script(tmp_path, "start", f"print({start!r})"))
    ran = await run_session(git_repo, script(turn(call("read_file", {"path": "app.py"}))), text="fix it")
    [read] = ran.of(ToolCallFinished)
    assert read.ok and read.message["content"].endswith("remember: app.py is generated")
    assert ran.session.messages[1]["content"] == "fix it\n\nthe ticket is BUG-7"
    assert ran.of(SessionStarted)[0].system_prompt.endswith("tests: pytest -q")


async def test_a_blocked_prompt_never_reaches_the_model(git_repo, script, teachback_home, tmp_path):
    block = json.dumps({"decision": "block", "reason": "no secrets in prompts"})
    toml_hooks(user_toml(teachback_home), "UserPromptSubmit", "", hook_script(tmp_path, "p", f"print({block!r})"))
    ran = await run_session(git_repo, script(turn(call("run_command", {"command": "touch x"}))))
    assert ran.finished.reason == "blocked" and "no secrets in prompts" in ran.finished.summary
    assert not ran.of(ToolCallStarted) and not (git_repo / "x").exists()


async def test_a_stop_hook_keeps_the_turn_going_once(git_repo, script, teachback_home, tmp_path):
    stop = hook_script(
        tmp_path,
        "stop",
        'if not event["stop_hook_active"]: print(json.dumps({"decision": "block", "reason": "run the tests first"}))',
    )
    toml_hooks(user_toml(teachback_home), "Stop", "", stop)
    model = script(
        turn(content="done"), turn(call("run_command", {"command": "touch tested"})), turn(content="now done")
    )
    ran = await run_session(git_repo, model, db=tmp_path / "f.db")
    assert ran.finished.reason == "answered" and (git_repo / "tested").exists()
    said = [m for m in ran.session.messages if m["role"] == "user"]
    assert said[-1]["content"].endswith("run the tests first")
    store = open_store(tmp_path / "f.db")
    assert store.conversation(ran.session.id) == ran.session.messages  # the hook's message is recorded in place
    store.close()


async def test_permission_request_hooks_answer_before_the_user_is_asked(git_repo, script, teachback_home, tmp_path):
    answer = hook_script(
        tmp_path,
        "permission",
        """
behavior = "allow" if event["tool_name"] == "run_command" else "deny"
print(json.dumps({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                  "decision": {"behavior": behavior, "message": "edits wait for review"}}}))
""",
    )
    toml_hooks(user_toml(teachback_home), "PermissionRequest", "", answer)
    edit = call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Howdy"})
    ran = await run_session(
        git_repo, script(turn(call("run_command", {"command": "touch ok"})), turn(edit)), approval="ask"
    )
    command, edited = ran.of(ToolCallFinished)
    assert not ran.of(ApprovalRequested)  # nobody was asked
    assert command.ok and (git_repo / "ok").exists()
    assert edited.error_kind == "denied" and "edits wait for review" in edited.result
    assert "Hello" in (git_repo / "app.py").read_text()
