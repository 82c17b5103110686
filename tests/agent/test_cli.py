"""The `teachback` command, run as a real process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agent.protocol import event_from_json
from tests.conftest import call, turn

TEACHBACK = [sys.executable, "-m", "cli"]


def teachback(
    *args: str, cwd: Path | None = None, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*TEACHBACK, *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ | (env or {}),
    )


def test_run_prints_a_transcript_records_and_exits_zero(git_repo, script, teachback_home):
    model = script(
        turn(call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Hey"}), content="Editing."),
        turn(call("finish", {"summary": "greeting changed"})),
    )
    done = teachback("run", "--workspace", str(git_repo), "--model", model, "--approval", "full-auto", "change it")
    assert done.returncode == 0, done.stderr
    assert "Editing." in done.stdout and "modify app.py" in done.stdout
    assert "[finished] Finished: greeting changed" in done.stdout
    assert "Hey" in (git_repo / "app.py").read_text()
    from feedback_store import open_store

    sessions = open_store(teachback_home / "feedback.db").list_sessions()
    assert len(sessions) == 1 and sessions[0].frontend == "cli"


def test_run_json_streams_events_that_round_trip(git_repo, script):
    model = script(turn(call("read_file", {"path": "app.py"})))
    done = teachback(
        "run",
        "--json",
        "--no-record",
        "--workspace",
        str(git_repo),
        "--model",
        model,
        "--approval",
        "full-auto",
        "look",
    )
    lines = done.stdout.splitlines()
    events = [event_from_json(line) for line in lines]
    assert [e.to_json() for e in events] == lines
    assert events[0].type == "session_started" and events[-1].type == "turn_finished"
    assert json.loads(lines[-1])["reason"] == "answered"


def test_limits_give_a_non_zero_exit_with_the_reason(git_repo, script):
    model = script(*[turn(call("read_file", {"path": "app.py"})) for _ in range(5)])
    done = teachback(
        "run",
        "--no-record",
        "--workspace",
        str(git_repo),
        "--model",
        model,
        "--approval",
        "full-auto",
        "--max-steps",
        "2",
        "loop",
    )
    assert done.returncode == 1
    assert "[max_steps] Stopped after 2 steps" in done.stdout


def test_ask_mode_prompts_on_the_terminal(git_repo, script):
    model = script(turn(call("edit_file", {"path": "app.py", "old_text": "Hello", "new_text": "Hey"})))
    done = teachback(
        "run",
        "--no-record",
        "--workspace",
        str(git_repo),
        "--model",
        model,
        "--approval",
        "ask",
        "change it",
        stdin="n\nkeep the greeting\n",
    )
    assert "Allow this edit? [y/N]" in done.stderr
    assert "denied" in done.stdout and "keep the greeting" in done.stdout
    assert "Hello" in (git_repo / "app.py").read_text()


def test_undo_command_restores_the_last_checkpoint(git_repo, script):
    model = script(turn(call("delete_file", {"path": "util.py"})))
    teachback("run", "--no-record", "--workspace", str(git_repo), "--model", model, "--approval", "full-auto", "rm")
    assert not (git_repo / "util.py").exists()
    done = teachback("undo", "--workspace", str(git_repo))
    assert done.returncode == 0 and "util.py" in done.stdout
    assert (git_repo / "util.py").exists()
    again = teachback("undo", "--workspace", str(git_repo))
    assert again.returncode == 1 and "Nothing to undo" in again.stderr


def test_broken_config_is_a_clear_error(git_repo):
    (git_repo / "teachback.toml").write_text('approval = "sometimes"\n')
    done = teachback("run", "--workspace", str(git_repo), "x")
    assert done.returncode == 2
    assert "configuration error" in done.stderr and "approval must be one of" in done.stderr
    assert "Traceback" not in done.stderr


def test_doctor_checks_the_environment(git_repo, script):
    model = script(turn(call("finish", {"summary": "x"})))
    done = teachback("doctor", "--workspace", str(git_repo), "--model", model)
    assert done.returncode == 0, done.stdout
    assert "ok  git:" in done.stdout and "ok  database:" in done.stdout and "1 scripted turns" in done.stdout
    missing = teachback("doctor", "--workspace", str(git_repo), "--model", "scripted//nonexistent.json")
    assert missing.returncode == 1 and "FAIL model" in missing.stdout


def test_doctor_says_what_it_read_and_the_settings_that_matter(git_repo, script):
    (git_repo / "teachback.toml").write_text("max_steps = 7\n")
    model = script(turn(call("finish", {"summary": "x"})))
    done = teachback("doctor", "--workspace", str(git_repo), "--model", model, env={"TEACHBACK_LESSONS": "false"})
    read = next(line for line in done.stdout.splitlines() if line.startswith("ok  read:"))
    assert str(git_repo / "teachback.toml") in read and "TEACHBACK_LESSONS" in read
    settings = next(line for line in done.stdout.splitlines() if line.startswith("ok  configuration:"))
    assert "max_steps 7" in settings and "lessons False" in settings and f"model {model}" in settings


def test_help_and_parser_do_not_import_litellm():
    probe = "import sys, cli.entry; cli.entry._parser(); print('litellm' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip() == "False"


def test_a_corrupt_database_is_a_clear_error_and_nothing_runs(git_repo, script, tmp_path):
    bad = tmp_path / "broken.db"
    bad.write_bytes(b"this is not a database" * 100)
    model = script(turn(call("delete_file", {"path": "util.py"})))
    done = teachback(
        "run", "--workspace", str(git_repo), "--model", model, "--approval", "full-auto", "--db", str(bad), "rm"
    )
    assert done.returncode == 2
    assert str(bad) in done.stderr and "--no-record" in done.stderr
    assert "Traceback" not in done.stderr
    assert (git_repo / "util.py").exists()
    assert bad.read_bytes() == b"this is not a database" * 100  # left as it was


def test_doctor_checks_the_embedded_model_the_way_the_provider_finds_it(git_repo, tmp_path):
    found = teachback("doctor", "--workspace", str(git_repo), "--model", "local/smollm2")
    assert "ok  model: local/smollm2: SmolLM2-135M-Instruct.Q4_1.gguf" in found.stdout
    missing = teachback("doctor", "--workspace", str(git_repo), "--model", f"local/{tmp_path}/none.gguf")
    assert missing.returncode == 1 and "FAIL model" in missing.stdout and "unknown local model" in missing.stdout


def test_store_commands_without_db_use_the_database_under_teachback_home(teachback_home, capsys):
    from cli.entry import main

    default = teachback_home / "feedback.db"
    assert main(["export", "--format", "sdpo", "--out", str(teachback_home / "out.jsonl")]) == 1
    assert f"No feedback database at {default}" in capsys.readouterr().err
    assert main(["stats", "--json"]) == 0
    assert default.is_file()
    assert main(["lessons", "list"]) == 0


def test_store_commands_without_db_follow_the_configured_database(teachback_home, tmp_path, monkeypatch, capsys):
    from cli.entry import main

    configured = tmp_path / "elsewhere" / "team.db"
    configured.parent.mkdir()
    monkeypatch.setenv("TEACHBACK_DB", str(configured))
    assert main(["stats", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["database"] == str(configured)
    monkeypatch.delenv("TEACHBACK_DB")
    (teachback_home / "teachback.toml").write_text(f"db = {json.dumps(str(configured))}\n")
    assert main(["stats", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["database"] == str(configured)
    assert not (teachback_home / "feedback.db").exists()
