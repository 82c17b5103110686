"""The agent panel's features, driven by the official ACP TypeScript library's client (panel_driver.mjs):
commands in the editor's terminal (inside teachback's sandbox, recorded as run_command), the session
history (session/list, session/resume), usage after each model call, and /undo of the last turn. An
editor whose terminal answers are malformed fails the command with a message, never a hang."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from feedback_store import open_store
from tests.acp.conftest import DATA, HERE, TEACHBACK, of_kind, said

# Each test starts one or two agents and their workers (about 15 s on a quiet machine); on two cores
# shared with other work, each can take minutes.
DRIVER_TIMEOUT = 300
pytestmark = pytest.mark.timeout(2 * DRIVER_TIMEOUT + 60)
START = "def greet(name):\n    return 'Hello, ' + name\n"  # app.py in git_repo


def panel(git_repo: Path, tmp_path: Path, script: str, steps: list[dict[str, Any]], **plan: Any) -> dict[str, Any]:
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the checks with the ACP TypeScript library need node 20 or newer")
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "TEACHBACK_HOME": os.environ["TEACHBACK_HOME"],
        "TEACHBACK_MODEL": f"scripted/{DATA / script}",
        "TEACHBACK_APPROVAL": "full-auto",
        "TEACHBACK_CONTEXT_SIZE": "32000",  # litellm knows no window for the scripted model
        "TEACHBACK_LOG_LEVEL": "INFO",
        **plan.pop("env", {}),
    }
    if "PYTHONPATH" in os.environ:  # the code under test, in the agent and its workers too
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    full = {
        "command": [str(TEACHBACK), "acp"],
        "env": env,
        "cwd": str(git_repo),
        "stderr": str(tmp_path / "agent.log"),
        "terminal": True,
        "steps": steps,
        **plan,
    }
    done = subprocess.run(
        ["node", str(HERE / "panel_driver.mjs")],
        input=json.dumps(full),
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT,
    )
    log = (tmp_path / "agent.log").read_text(errors="replace")[-4000:] if (tmp_path / "agent.log").exists() else ""
    assert done.returncode == 0, f"panel_driver.mjs failed:\n{done.stderr}\nagent log:\n{log}"
    return json.loads(done.stdout)


def _store():
    return open_store(Path(os.environ["TEACHBACK_HOME"]) / "feedback.db")


def _finished(session_id: str) -> dict[str, Any]:
    with _store() as store:
        return next(e for e in store.events(session_id) if e["type"] == "tool_call_finished")


NEW_AND_PROMPT = [{"do": "new"}, {"do": "prompt", "text": "run the check"}]


@pytest.mark.parametrize("sandbox", ["none", "bwrap"])
def test_a_command_runs_in_the_editors_terminal_inside_the_sandbox_and_is_recorded(
    git_repo: Path, tmp_path: Path, sandbox: str
) -> None:
    if sandbox == "bwrap" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (.ci/run installs it)")
    seen = panel(git_repo, tmp_path, "terminal_run.json", NEW_AND_PROMPT, env={"TEACHBACK_SANDBOX": sandbox})
    [terminal] = seen["terminals"]
    request = terminal["request"]
    command = "echo from the terminal in ${TEACHBACK_SANDBOX:-no sandbox}; exit 3"
    if sandbox == "none":
        assert (request["command"], request["args"]) == ("/bin/sh", ["-c", command])
    else:  # the sandbox's wrapper is what the terminal runs
        assert Path(request["command"]).name == "bwrap" and request["args"][-3:] == ["/bin/sh", "-c", command]
    assert request["cwd"] == str(git_repo) and {"name": "TEACHBACK_AGENT", "value": "1"} in request["env"]
    assert terminal["exit"] == {"exitCode": 3, "signal": None} and terminal["released"] is True
    updates = seen["steps"][1]["updates"]
    shown = [
        u
        for u in of_kind(updates, "tool_call_update")
        if {"type": "terminal", "terminalId": "term-1"} in u.get("content", [])
    ]
    assert shown and shown[-1]["status"] == "failed"  # the terminal stays in the call with its result
    assert "[exit code 3" in shown[-1]["content"][-1]["content"]["text"]
    assert seen["steps"][1]["answer"] == {"stopReason": "end_turn"}
    # recorded as any run_command: the exit code and the output the terminal gave
    where = "no sandbox" if sandbox == "none" else "bwrap"
    finished = _finished(seen["sessionId"])
    assert finished["exit_code"] == 3 and finished["error_kind"] == "exit_status"
    assert f"from the terminal in {where}" in finished["result"]
    # usage after each of the two model calls, of the configured context size
    usage = of_kind(updates, "usage_update")
    assert len(usage) == 2 and all(u["size"] == 32000 and u["used"] > 0 for u in usage)


def test_the_user_stops_a_command_in_the_editor_and_the_turn_goes_on(git_repo: Path, tmp_path: Path) -> None:
    seen = panel(git_repo, tmp_path, "terminal_stop.json", NEW_AND_PROMPT, terminalAnswers="stop")
    assert seen["terminals"][0]["exit"]["signal"] == "SIGTERM"
    assert said(seen["steps"][1]["updates"]).endswith("The command was stopped.")
    finished = _finished(seen["sessionId"])
    assert finished["error_kind"] == "interrupted" and finished["exit_code"] is None
    assert "stopped in the editor's terminal by SIGTERM" in finished["result"] and "started" in finished["result"]


def test_a_command_past_its_timeout_is_killed_in_the_editors_terminal(git_repo: Path, tmp_path: Path) -> None:
    seen = panel(git_repo, tmp_path, "terminal_timeout.json", NEW_AND_PROMPT)
    [terminal] = seen["terminals"]
    assert terminal["killed"] is True and terminal["released"] is True and terminal["exit"]["signal"] == "SIGKILL"
    assert said(seen["steps"][1]["updates"]).endswith("It took too long.")
    finished = _finished(seen["sessionId"])
    assert finished["error_kind"] == "timeout" and "[killed after 2 s timeout]" in finished["result"]
    assert "begun" in finished["result"]


@pytest.mark.parametrize(
    ("answers", "says"),
    [
        ("bad-create", "terminal/create is malformed (terminalId: "),
        ("bad-output", "terminal/output is malformed (output: "),
        ("bad-exit", "neither an exit code nor a signal"),
    ],
)
def test_malformed_terminal_answers_fail_the_command_with_a_message(
    git_repo: Path, tmp_path: Path, answers: str, says: str
) -> None:
    seen = panel(git_repo, tmp_path, "terminal_run.json", NEW_AND_PROMPT, terminalAnswers=answers)
    turn = seen["steps"][1]
    assert turn["answer"] == {"stopReason": "end_turn"}  # the turn went on to its end
    failed = of_kind(turn["updates"], "tool_call_update")[-1]
    assert failed["status"] == "failed"
    text = failed["content"][-1]["content"]["text"]
    assert "The editor's terminal failed" in text and says in text
    assert _finished(seen["sessionId"])["error_kind"] == "unavailable"  # the editor's fault, not the model's


def test_the_history_lists_an_earlier_session_and_resume_goes_on_with_it(git_repo: Path, tmp_path: Path) -> None:
    first = panel(git_repo, tmp_path, "resume.json", [{"do": "new"}, {"do": "prompt", "text": "exclaim the greeting"}])
    assert first["initialize"]["agentCapabilities"]["sessionCapabilities"] == {"list": {}, "resume": {}}
    earlier = first["sessionId"]
    steps = [{"do": "list"}, {"do": "resume", "sessionId": earlier}, {"do": "prompt", "text": "and now?"}]
    seen = panel(git_repo, tmp_path, "resume.json", steps)
    listed = seen["steps"][0]["answer"]["sessions"]
    [entry] = [s for s in listed if s["sessionId"] == earlier]
    assert entry["cwd"] == str(git_repo) and entry["title"] == "exclaim the greeting" and entry["updatedAt"]
    resumed = seen["steps"][1]
    assert resumed["answer"]["modes"]["currentModeId"] == "full-auto"
    assert not of_kind(resumed["updates"], "user_message_chunk")  # no replay
    # the conversation came back: the scripted model answers with its fourth turn
    assert said(seen["steps"][2]["updates"]) == "Second answer, after the load."


def test_undo_from_the_panel_reverts_the_last_turns_edits(git_repo: Path, tmp_path: Path) -> None:
    steps = [{"do": "new"}, {"do": "prompt", "text": "exclaim the greeting"}, {"do": "prompt", "text": "/undo"}]
    seen = panel(git_repo, tmp_path, "resume.json", steps)
    [offered] = of_kind(seen["steps"][0]["updates"], "available_commands_update")
    assert [c["name"] for c in offered["availableCommands"]] == ["undo"]
    edited = [c for u in of_kind(seen["steps"][1]["updates"], "tool_call_update") for c in u.get("content", [])]
    assert any(c["type"] == "diff" and "return f'Hello, {name}!'" in c["newText"] for c in edited)  # the edit landed
    undo = seen["steps"][2]
    assert undo["answer"] == {"stopReason": "end_turn"}
    assert said(undo["updates"]) == "Undid the last turn. Restored: app.py"
    assert (git_repo / "app.py").read_text() == START
    with _store() as store:
        assert [e["paths"] for e in store.events(seen["sessionId"]) if e["type"] == "turn_undone"] == [["app.py"]]
