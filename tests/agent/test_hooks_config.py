"""Where hooks come from and what their answers mean: teachback.toml and .claude/settings.json with the
same keys, Claude Code's tool names, entries that cannot be used, `teachback doctor`'s lines, and
each event's reading of an exit status and JSON output."""

from __future__ import annotations

import json

from agent.config import load_settings
from agent.hooks.command import Ran, run_hook
from agent.hooks.config import HookConfig, load_hooks
from agent.hooks.verdicts import Verdict, combine, read_verdict
from cli.entry import main
from tests.agent.hooks_helpers import claude_settings, toml_hooks


def test_teachback_toml_and_claude_settings_use_the_same_keys(tmp_path, teachback_home):
    toml_hooks(teachback_home / "teachback.toml", "PreToolUse", "edit_file|run_command", "./check.sh", timeout=5)
    claude_settings(
        tmp_path,
        {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./c.sh", "timeout": 7}]}]},
    )
    assert load_settings(tmp_path).model  # a [hooks] table is not an unknown setting
    mine = load_hooks(tmp_path)
    assert [(h.event, h.matcher, h.command, h.timeout, h.claude_names) for h in mine.hooks] == [
        ("PreToolUse", "edit_file|run_command", "./check.sh", 5.0, False)
    ]
    assert [(h.event, h.matcher, h.command, h.timeout, h.claude_names) for h in mine.withheld] == [
        ("PreToolUse", "Bash", "./c.sh", 7.0, True)
    ]


def test_matchers_name_teachbacks_tools_and_in_claude_settings_claude_codes_too():
    ours = HookConfig("PreToolUse", "x", "teachback.toml", matcher="Bash")
    claude = HookConfig("PreToolUse", "x", ".claude/settings.json", matcher="Bash", claude_names=True)
    assert not ours.matches("run_command") and claude.matches("run_command") and not claude.matches("read_file")
    both = HookConfig("PreToolUse", "x", "s", matcher="Edit|Write", claude_names=True)
    assert [both.matches(t) for t in ("edit_file", "create_file", "delete_file")] == [True, True, False]
    server = HookConfig("PreToolUse", "x", "s", matcher="mcp__github__.*")
    assert server.matches("mcp__github__create_issue") and not server.matches("mcp__jira__create_issue")
    assert HookConfig("PreToolUse", "x", "s", matcher="*").matches("anything")
    assert HookConfig("PreToolUse", "x", "s", matcher="edit_file").matches("edit_file")
    assert not HookConfig("PreToolUse", "x", "s", matcher="edit").matches("edit_file")  # plain names are exact


def test_entries_that_cannot_be_used_are_kept_with_their_problem(tmp_path, teachback_home):
    (teachback_home / "teachback.toml").write_text(
        """
[[hooks.PreToolUse]]
matcher = "("
[[hooks.PreToolUse.hooks]]
command = "x"
[[hooks.Notification]]
[[hooks.Notification.hooks]]
command = "y"
[[hooks.PostToolUse]]
[[hooks.PostToolUse.hooks]]
type = "prompt"
command = "z"
[[hooks.Stop]]
[[hooks.Stop.hooks]]
command = "w"
timeout = -1
"""
    )
    found = load_hooks(tmp_path)
    assert found.hooks == ()
    problems = [h.problem for h in found.broken]
    assert len(problems) == 4 and all(p.startswith("this hook cannot be used") for p in problems)
    assert any("not a valid regular expression" in p for p in problems)
    assert any("'Notification'" in p for p in problems) and any("'prompt'" in p for p in problems)
    assert any("timeout must be seconds above 0" in p for p in problems)


def test_a_hostile_claude_settings_file_is_a_problem_not_a_crash(tmp_path):
    (tmp_path / ".claude").mkdir()
    for text in ("[" * 100_000, "[1, 2]", json.dumps({"hooks": ["PreToolUse"]}), "\xff\xfe"):
        (tmp_path / ".claude" / "settings.json").write_text(text)
        assert main(["mcp", "allow", "--workspace", str(tmp_path)]) == 0
        found = load_hooks(tmp_path)
        assert found.hooks == () and len(found.broken) == 1, text[:10]


def test_doctor_lists_each_hook_where_it_comes_from_and_whether_it_runs(tmp_path, teachback_home, capsys, script):
    toml_hooks(teachback_home / "teachback.toml", "PreToolUse", "run_command", "./mine.sh")
    claude_settings(
        tmp_path,
        {
            "PreToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "./theirs.sh"}]}],
            "PostToolUse": [{"hooks": [{"type": "command", "command": "teachback capture --agent claude"}]}],
        },
    )
    main(["doctor", "--workspace", str(tmp_path), "--model", script()])
    out = capsys.readouterr().out
    assert f"ok  hook PreToolUse run_command: ./mine.sh: runs [{teachback_home / 'teachback.toml'}]" in out
    assert "ok  hook PreToolUse Edit: ./theirs.sh: not allowed yet [" in out
    assert "hook PostToolUse: teachback capture --agent claude: skipped: it runs teachback capture" in out
    main(["mcp", "allow", "--workspace", str(tmp_path)])
    main(["mcp", "list", "--workspace", str(tmp_path)])  # the same lines, without doctor's other checks
    assert "hook PreToolUse Edit: ./theirs.sh: runs [" in capsys.readouterr().out


def ran(code: int | None, out: str = "", err: str = "", **more) -> Ran:
    return Ran(code, out, err, **more)


def test_exit_2_means_what_the_hooks_reference_says_for_each_event():
    blocked = ran(2, err="because")
    assert read_verdict("PreToolUse", blocked, 1) == Verdict(decision="deny", reason="because")
    assert read_verdict("PermissionRequest", blocked, 1).decision == "deny"
    assert read_verdict("UserPromptSubmit", blocked, 1).decision == "block"
    assert read_verdict("Stop", blocked, 1).decision == "block"
    assert read_verdict("PostToolUse", blocked, 1) == Verdict(context="because")  # it already ran
    assert read_verdict("SessionStart", blocked, 1) == Verdict(notice="because")
    assert read_verdict("PreToolUse", ran(2), 1).reason == "(the hook gave no reason on stderr)"
    assert read_verdict("PreToolUse", ran(1, err="boom"), 1).problem == "exited with status 1: boom; it was skipped"
    assert "timeout" in (read_verdict("PreToolUse", ran(None, timed_out=True), 3).problem or "")
    assert "could not start" in (read_verdict("PreToolUse", ran(None, start_error="no such file"), 3).problem or "")


def test_json_output_and_what_cannot_be_read():
    def pre(specific: dict, **top) -> Verdict:
        body = {"hookSpecificOutput": {"hookEventName": "PreToolUse", **specific}, **top}
        return read_verdict("PreToolUse", ran(0, json.dumps(body)), 1)

    assert pre({"permissionDecision": "deny", "permissionDecisionReason": "no"}) == Verdict(
        decision="deny", reason="no"
    )
    assert pre({"permissionDecision": "ask"}).decision == "ask"
    assert pre({"updatedInput": {"path": "b"}, "additionalContext": "note"}).updated_input == {"path": "b"}
    assert pre({"permissionDecision": "maybe"}).problem and pre({"permissionDecision": "maybe"}).decision is None
    assert pre({}, **{"continue": False, "stopReason": "enough"}).stop == "enough"
    assert read_verdict("PreToolUse", ran(0, json.dumps({"decision": "block", "reason": "old"})), 1).decision == "deny"
    allow = {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}
    assert read_verdict("PermissionRequest", ran(0, json.dumps(allow)), 1).decision == "allow"
    assert (
        read_verdict("PreToolUse", ran(0, "[1]"), 1).problem == "printed text that is not a JSON object; it was ignored"
    )
    assert "not a JSON object" in (read_verdict("PreToolUse", ran(0, "{" * 200_000), 1).problem or "")
    assert read_verdict("UserPromptSubmit", ran(0, "plain context"), 1) == Verdict(context="plain context")


def test_deny_wins_over_ask_and_ask_over_allow():
    allow, ask, deny = (
        Verdict(decision="allow"),
        Verdict(decision="ask", reason="?"),
        Verdict(decision="deny", reason="x"),
    )
    assert combine([allow, ask, deny]).decision == "deny" and combine([allow, ask]).decision == "ask"
    assert combine([allow, Verdict(updated_input={"a": 1})]) == Verdict(decision="allow", updated_input={"a": 1})
    assert combine([deny, Verdict(updated_input={"a": 1})]).updated_input is None


async def test_a_flood_of_output_is_cut_and_a_hook_that_never_reads_its_input_does_not_stall(tmp_path):
    flood = "python3 -c \"import sys; sys.stdout.write('x' * 5_000_000); sys.stderr.write('y' * 5_000_000)\""
    done = await run_hook(flood, {"n": 1}, timeout=60, root=tmp_path)
    assert done.exit_code == 0 and len(done.stdout) < 70_000 and done.stdout.endswith("more bytes dropped]")
    assert len(done.stderr) < 70_000
    deaf = await run_hook("true", {"tool_input": {"content": "z" * 3_000_000}}, timeout=60, root=tmp_path)
    assert deaf.exit_code == 0 and not deaf.timed_out
    missing = await run_hook("/no/such/hook", {}, timeout=60, root=tmp_path)
    assert missing.exit_code == 127  # the shell's "not found": a non-blocking error, reported
