"""`teachback run` from a newcomer's side, as a real process: what it says before and after the
turn, starts that cannot work (refused before anything is recorded), a call shown once in the text
tool mode, Ctrl-C, and the bare `teachback`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli.commands import COMMANDS, GROUPS
from feedback_store import open_store
from tests.conftest import call, turn

TEACHBACK = [sys.executable, "-m", "cli"]


def teachback(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*TEACHBACK, *args], capture_output=True, text=True, timeout=120, env=env or os.environ.copy()
    )


def without_keys() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN"))}


def recorded_sessions(home: Path) -> int:
    db = home / "feedback.db"
    if not db.exists():
        return 0
    with open_store(db) as store:
        return len(store.list_sessions())


@pytest.mark.parametrize("instruction", ["", "   ", "\n\t"])
def test_an_empty_instruction_exits_2_and_records_nothing(git_repo, script, teachback_home, instruction):
    model = script(turn(call("finish", {"summary": "x"})))
    done = teachback("run", "--workspace", str(git_repo), "--model", model, instruction)
    assert done.returncode == 2
    assert "the instruction is empty" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert recorded_sessions(teachback_home) == 0


def test_a_typo_in_the_model_gets_did_you_mean_and_no_word_about_keys(git_repo, teachback_home):
    done = teachback("run", "--workspace", str(git_repo), "--model", "anthropic/claude-sonet", "hi", env=without_keys())
    assert done.returncode == 2
    assert "did you mean anthropic/claude-sonnet-" in done.stderr
    assert "API key" not in done.stderr and "ANTHROPIC_API_KEY" not in done.stderr
    assert recorded_sessions(teachback_home) == 0


def test_the_embedded_model_named_without_its_provider_gets_local_suggested(git_repo, teachback_home):
    done = teachback("run", "--workspace", str(git_repo), "--model", "smollm2", "hi", env=without_keys())
    assert done.returncode == 2
    assert "Did you mean local/smollm2?" in done.stderr
    assert "API key" not in done.stderr
    assert recorded_sessions(teachback_home) == 0


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("anthropic/claude-sonnet-4-5", "needs its API key in ANTHROPIC_API_KEY"),
        ("nosuchprovider-model", "names no provider litellm knows"),
        ("scripted//no/such/script.json", "cannot read script"),
    ],
)
def test_a_failed_start_is_not_recorded_as_a_session(git_repo, teachback_home, model, said):
    done = teachback("run", "--workspace", str(git_repo), "--model", model, "do it", env=without_keys())
    assert done.returncode == 2
    assert said in done.stderr and "Traceback" not in done.stderr
    assert recorded_sessions(teachback_home) == 0


def test_run_says_what_it_runs_on_before_the_model_and_what_it_recorded_after(git_repo, script, teachback_home):
    model = script(
        turn(call("edit_file", {"path": "app.py", "old_text": "Goodbye", "new_text": "Hey"})),
        turn(call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Hey"})),
        turn(call("finish", {"summary": "greeting changed"})),
    )
    done = teachback("run", "--workspace", str(git_repo), "--model", model, "--approval", "full-auto", "change it")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    first, last = lines[0], lines[-1]
    database = teachback_home / "feedback.db"
    assert first.startswith(f"teachback: {model} · workspace {git_repo}")
    assert f"approval full-auto · database {database} · loading the model…" in first
    with open_store(database) as store:
        [session] = store.list_sessions()
    assert last == (
        f"teachback: recorded 1 feedback pair (1 corrected) in session {session.id} → teachback stats · "
        "teachback export --format sdpo --out pairs.jsonl"
    )
    assert "teachback:" not in done.stdout  # the transcript alone on stdout


def test_the_closing_line_names_a_database_that_stats_would_not_read(git_repo, script, tmp_path):
    model = script(turn(call("finish", {"summary": "done"})))
    elsewhere = tmp_path / "other.db"
    done = teachback("run", "--workspace", str(git_repo), "--model", model, "--db", str(elsewhere), "go")
    assert done.returncode == 0, done.stderr
    assert f"database {elsewhere}" in done.stderr.splitlines()[0]
    assert done.stderr.splitlines()[-1].endswith(
        f"→ teachback stats --db {elsewhere} · teachback export --db {elsewhere} --format sdpo --out pairs.jsonl"
    )


def test_without_recording_the_lines_say_so(git_repo, script):
    model = script(turn(call("finish", {"summary": "done"})))
    done = teachback("run", "--no-record", "--workspace", str(git_repo), "--model", model, "go")
    assert "database not recorded" in done.stderr.splitlines()[0]
    assert done.stderr.splitlines()[-1] == "teachback: not recorded (--no-record)"


@pytest.mark.parametrize(
    ("mode", "reply", "prose"),
    [
        (
            "text",
            'Reading it.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "app.py"}}\n</tool_call>',
            True,
        ),
        ("grammar", '{"name": "read_file", "arguments": {"path": "app.py"}}', False),
    ],
)
def test_in_the_text_and_grammar_tool_modes_a_call_is_printed_once(git_repo, script, mode, reply, prose):
    model = script({"content": reply, "tool_calls": []}, {"content": "All read.", "tool_calls": []})
    env = {**os.environ, "TEACHBACK_TOOL_MODE": mode}
    done = teachback("run", "--no-record", "--workspace", str(git_repo), "--model", model, "look", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("read_file") == 1
    assert "→ read_file" in done.stdout and ("Reading it." in done.stdout) == prose
    assert "<tool_call>" not in done.stdout and '"name"' not in done.stdout
    assert "All read." in done.stdout


def interrupt_when_asked(process: subprocess.Popen, settle: float, timeout: float) -> tuple[str, str, float]:
    """Send Ctrl-C `settle` seconds after a `run --json` process's turn started (the model is being
    asked); its output, its errors, and how long it took to return after the signal."""
    try:
        for line in process.stdout:
            if json.loads(line)["type"] == "turn_started":
                break
        time.sleep(settle)
        process.send_signal(signal.SIGINT)
        sent = time.monotonic()
        out, err = process.communicate(timeout=timeout)
        return out, err, time.monotonic() - sent
    finally:
        process.kill()


def test_ctrl_c_returns_within_two_seconds(git_repo, script, teachback_home):
    model = script({"content": "slow", "tool_calls": [], "delay": 60})
    process = subprocess.Popen(
        [*TEACHBACK, "run", "--json", "--workspace", str(git_repo), "--model", model, "wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    out, err, took = interrupt_when_asked(process, settle=0.5, timeout=30)
    assert took < 2.0, f"returned {took:.1f}s after Ctrl-C"
    assert process.returncode == 1
    assert json.loads(out.splitlines()[-1])["reason"] == "interrupted"
    assert "interrupting" in err
    assert recorded_sessions(teachback_home) == 1  # what ran is recorded


def test_teachback_alone_prints_the_help_and_exits_0():
    done = teachback()
    assert done.returncode == 0
    assert done.stdout.startswith("usage: teachback") and "error" not in done.stderr


def test_help_lists_every_command_once_with_a_start_here_group_first():
    shown = teachback("--help").stdout
    groups = shown[shown.index("start here:") :]
    assert [line for line in groups.splitlines() if line.endswith(":")][0] == "start here:"
    start = groups.split("\n\n")[0].splitlines()[1:]
    assert [line.split()[0] for line in start] == ["demo", "run", "tui", "stats", "export"]
    named = [name for names in GROUPS.values() for name in names]
    assert sorted(named) == sorted(COMMANDS)  # each command in exactly one group
    for name, command in COMMANDS.items():
        assert f"  {name} " in groups and command.summary in groups
