"""`teachback import` on logs no agent wrote: lines nested 100,000 deep, counts that are not numbers,
a `type` that is a list or an object, numbers too big to read, a named pipe where a log should be.
Every bad line is counted, named by file and line, and skipped; the good sessions around it import;
nothing blocks and nothing prints a traceback."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

LOGS = Path(__file__).parent / "data" / "agent_logs"
CLAUDE = sorted((LOGS / "claude-code").rglob("*.jsonl"))
CODEX = sorted((LOGS / "codex").rglob("*.jsonl"))
DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a": ' * 100_000 + "1" + "}" * 100_000
HUGE_INTEGER = '{"type": "user", "n": ' + "9" * 5000 + "}"


def teachback(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TEACHBACK_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, env=env, timeout=120)


def sessions(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    found = dict(conn.execute("SELECT session_id, count(*) FROM events GROUP BY session_id"))
    conn.close()
    return found


def claude_bad_lines(first: dict) -> list[str]:
    reply = {"id": "m1", "role": "assistant", "model": "claude", "content": [{"type": "text", "text": "hi"}]}
    return [
        DEEP_ARRAY,
        DEEP_OBJECT,
        json.dumps({**first, "type": "assistant", "message": {**reply, "usage": {"input_tokens": "lots"}}}),
        json.dumps({**first, "type": "assistant", "message": {**reply, "usage": {"output_tokens": [1]}}}),
        json.dumps({**first, "type": "assistant", "message": {**reply, "usage": {"output_tokens": 2**80}}}),
        json.dumps({**first, "type": ["user"]}),
        json.dumps({**first, "type": {"user": True}}),
        json.dumps({**first, "timestamp": 1e308}),
        json.dumps(
            {**first, "message": {"role": "user", "content": [{"type": "tool_result", "content": [{"text": 5}]}]}}
        ),
        HUGE_INTEGER,
    ]


def codex_bad_lines(first: dict) -> list[str]:
    item = {"timestamp": first["timestamp"], "type": "response_item"}
    return [
        DEEP_ARRAY,
        DEEP_OBJECT,
        json.dumps({**item, "type": ["response_item"], "payload": {"type": "message"}}),
        json.dumps({**item, "payload": {"type": {"message": 1}, "role": "user"}}),
        json.dumps({**item, "payload": [1, 2]}),
        json.dumps({**item, "payload": {"type": "function_call", "name": ["shell"], "call_id": "c9"}}),
        json.dumps({**item, "timestamp": [2025]}),
        HUGE_INTEGER,
    ]


@pytest.mark.parametrize(
    ("agent", "logs", "bad_lines"), [("claude-code", CLAUDE, claude_bad_lines), ("codex", CODEX, codex_bad_lines)]
)
def test_every_bad_line_is_named_and_skipped_and_the_files_around_it_import(
    tmp_path: Path, agent: str, logs: list[Path], bad_lines
) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    good_before, middle, good_after = logs
    shutil.copy(good_before, folder / f"rollout-a-{good_before.name}")
    shutil.copy(good_after, folder / f"rollout-c-{good_after.name}")
    lines = middle.read_text().splitlines()
    bad = bad_lines(json.loads(lines[0]))
    broken = folder / f"rollout-b-{middle.name}"
    broken.write_text("\n".join([lines[0], *bad, *lines[1:]]) + "\n")
    reference = tmp_path / "reference"
    reference.mkdir()
    shutil.copy(middle, reference / middle.name)

    done = teachback("import", agent, str(folder), "--db", str(tmp_path / "f.db"), home=tmp_path)

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and not done.stderr, done.stderr
    assert "Imported 3 new" in done.stdout
    for number in range(2, 2 + len(bad)):  # each bad line, by file and number
        assert f"{broken}:{number}: " in done.stdout, (number, done.stdout)
    assert "nested more than 200 levels deep" in done.stdout
    assert "not a string" in done.stdout
    alone = teachback("import", agent, str(reference), "--db", str(tmp_path / "alone.db"), home=tmp_path)
    assert alone.returncode == 0, alone.stderr
    imported = sessions(tmp_path / "f.db")
    assert len(imported) == 3
    # the session with the bad lines lost nothing else: every event its clean log gives
    assert set(sessions(tmp_path / "alone.db").items()) <= set(imported.items())


def test_the_wrong_types_are_named_with_the_field_and_what_it_should_be(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    lines = CLAUDE[1].read_text().splitlines()
    (folder / "s.jsonl").write_text("\n".join([lines[0], *claude_bad_lines(json.loads(lines[0]))[2:4]]) + "\n")
    done = teachback("import", "claude-code", str(folder), "--db", str(tmp_path / "f.db"), home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "s.jsonl:2: `message.usage.input_tokens` is a string 'lots', not a whole number" in done.stdout
    assert "s.jsonl:3: `message.usage.output_tokens` is an array, not a whole number" in done.stdout
    assert "2 lines with a field of the wrong type" in done.stdout


def test_a_named_pipe_is_named_and_skipped_without_blocking(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    shutil.copy(CLAUDE[0], folder / "a.jsonl")
    os.mkfifo(folder / "b.jsonl")  # no writer: opening it for reading the plain way waits forever
    shutil.copy(CLAUDE[2], folder / "c.jsonl")
    done = teachback("import", "claude-code", str(folder), "--db", str(tmp_path / "f.db"), home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Imported 2 new" in done.stdout and "Skipped 1 file(s)" in done.stdout
    assert f"could not read {folder / 'b.jsonl'}: it is a named pipe, not a regular file" in done.stderr
    assert "Traceback" not in done.stderr
    assert len(sessions(tmp_path / "f.db")) == 2


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_exit_2_when_no_given_path_could_be_read(tmp_path: Path, agent: str) -> None:
    pipe = tmp_path / "pipe.jsonl"
    os.mkfifo(pipe)
    only_pipes = tmp_path / "pipes"
    only_pipes.mkdir()
    os.mkfifo(only_pipes / "rollout-x.jsonl")
    (tmp_path / "dangling.jsonl").symlink_to(tmp_path / "nowhere.jsonl")
    for given, said in (
        (pipe, "it is a named pipe, not a regular file"),
        (only_pipes, "it is a named pipe, not a regular file"),
        (tmp_path / "dangling.jsonl", "No such file or directory"),
        (tmp_path / "missing", "does not exist"),
    ):
        done = teachback("import", agent, str(given), "--db", str(tmp_path / "f.db"), home=tmp_path)
        assert done.returncode == 2, (given, done.stdout, done.stderr)
        assert said in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_an_empty_folder_imports_nothing_and_is_not_an_error(tmp_path: Path) -> None:
    done = teachback("import", "codex", str(tmp_path), "--db", str(tmp_path / "f.db"), home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Imported 0 new and 0 changed codex session(s) from 0 file(s)" in done.stdout


def test_a_file_of_bad_lines_only_is_counted_and_named(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "junk.jsonl").write_text(f"{DEEP_ARRAY}\nnot json\n[1]\n")
    shutil.copy(CLAUDE[0], folder / "good.jsonl")
    done = teachback("import", "claude-code", str(folder), "--db", str(tmp_path / "f.db"), home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Imported 1 new" in done.stdout
    assert "1 lines nested too deep" in done.stdout and "2 lines that are not JSON objects" in done.stdout
    assert "1 files with no session in them" in done.stdout
    for number, said in ((1, "nested more than 200"), (2, "not JSON (Expecting value"), (3, "an array, not a JSON")):
        assert f"{folder / 'junk.jsonl'}:{number}: {said}" in done.stdout, done.stdout
