"""`teachback hooks install|uninstall|status` on the agents' own settings files, run as a user runs
them: every hook the user has is kept, installing twice leaves one, and uninstall gives the file back
byte for byte apart from ours."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.capture.hooks_run import EXECUTABLE, installed_command, teachback

# A user's own settings, as they wrote them: four-space indent, other keys, a hook of their own,
# text that is not ASCII, no newline at the end.
USERS_OWN = """{
    "model": "opus",
    "permissions": {"allow": ["Bash(npm test:*)"]},
    "hooks": {
        "PostToolUse": [
            {"matcher": "Write|Edit", "hooks": [{"type": "command", "command": "prettier --write \\"$FILE\\""}]}
        ]
    },
    "statusLine": "café ☕"
}"""
SETTINGS = {"claude-code": ".claude/settings.json", "codex": ".codex/hooks.json"}


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_install_twice_keeps_the_users_hooks_and_one_of_ours(tmp_path: Path, agent: str) -> None:
    settings = tmp_path / SETTINGS[agent]
    settings.parent.mkdir()
    settings.write_text(USERS_OWN, encoding="utf-8")
    for _ in range(2):
        done = teachback("hooks", "install", agent, "--project", cwd=tmp_path)
        assert done.returncode == 0, done.stderr

    written = json.loads(settings.read_text(encoding="utf-8"))
    assert written["model"] == "opus" and written["statusLine"] == "café ☕"
    post = written["hooks"]["PostToolUse"]
    assert post[0] == json.loads(USERS_OWN)["hooks"]["PostToolUse"][0]  # the user's hook, first and unchanged
    command = installed_command(settings, "PostToolUse")  # exactly one of ours
    assert command.split()[-2:] == ["capture", agent]
    assert os.path.isabs(command.split()[0]) and os.access(command.split()[0], os.X_OK)
    for event in ("UserPromptSubmit", "PreToolUse", "PermissionRequest", "Stop"):
        assert installed_command(settings, event) == command

    status = teachback("hooks", "status", agent, cwd=tmp_path).stdout
    assert f"{agent}: installed in {settings}" in status

    done = teachback("hooks", "uninstall", agent, "--project", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert settings.read_bytes() == USERS_OWN.encode("utf-8")
    assert f"{agent}: not installed in {settings}" in teachback("hooks", "status", agent, cwd=tmp_path).stdout


def test_uninstall_after_the_user_changed_the_file_removes_only_ours(tmp_path: Path) -> None:
    settings = tmp_path / ".claude/settings.json"
    assert teachback("hooks", "install", "claude-code", "--project", "--guard", cwd=tmp_path).returncode == 0
    changed = json.loads(settings.read_text(encoding="utf-8"))
    changed["env"] = {"FOO": "1"}
    mine = {"hooks": [{"type": "command", "command": "echo mine"}]}
    changed["hooks"]["Stop"].insert(0, mine)
    settings.write_text(json.dumps(changed, indent=2) + "\n", encoding="utf-8")
    assert "installed (guarding)" in teachback("hooks", "status", "claude-code", cwd=tmp_path).stdout

    assert teachback("hooks", "uninstall", "claude-code", "--project", cwd=tmp_path).returncode == 0
    assert json.loads(settings.read_text(encoding="utf-8")) == {"hooks": {"Stop": [mine]}, "env": {"FOO": "1"}}


def test_a_file_that_did_not_exist_is_gone_again_after_uninstall(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "CODEX_HOME": str(home / ".codex"), "HOME": str(home)}
    assert teachback("hooks", "install", "codex", "--user", cwd=tmp_path, env=env).returncode == 0
    assert installed_command(home / ".codex/hooks.json", "Stop").endswith("capture codex")
    assert teachback("hooks", "uninstall", "codex", "--user", cwd=tmp_path, env=env).returncode == 0
    assert not (home / ".codex/hooks.json").exists()
    done = teachback("hooks", "uninstall", "codex", "--user", cwd=tmp_path, env=env)
    assert done.returncode == 0 and "No teachback hook" in done.stdout


@pytest.mark.parametrize("text", ['{"hooks": [1, 2]', "[1, 2]", '{"hooks": {"Stop": {}}}', '{"hooks": "x"}'])
def test_a_settings_file_it_cannot_parse_is_left_untouched(tmp_path: Path, text: str) -> None:
    settings = tmp_path / ".claude/settings.json"
    settings.parent.mkdir()
    settings.write_text(text, encoding="utf-8")
    for action in ("install", "uninstall"):
        done = teachback("hooks", action, "claude-code", "--project", cwd=tmp_path)
        assert done.returncode == 2
        assert "left untouched" in done.stderr and str(settings) in done.stderr
        assert "Traceback" not in done.stderr
    assert settings.read_text(encoding="utf-8") == text


def test_the_hook_imports_almost_nothing(tmp_path: Path) -> None:
    """The host waits for every call: no store, protocol, model stack or dataclass machinery loads."""
    payload = json.dumps({"session_id": "s", "cwd": str(tmp_path), "hook_event_name": "PreToolUse"})
    words = [str(EXECUTABLE)] if EXECUTABLE.is_file() else ["-P", "-m", "cli"]
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *words, "capture", "claude-code", "--guard"],
        input=payload,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 0 and done.stdout == ""
    loaded = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert {"json", "sqlite3", "feedback_store.capture.inbox"} <= loaded
    heavy = {"sqlite_utils", "litellm", "agent.protocol", "agent.config", "feedback_store.store", "dataclasses"}
    assert not heavy & loaded, heavy & loaded
