"""`teachback import claude-code` and `teachback import codex` on session logs built from the agents'
published formats (tests/store/data/agent_logs: three versions of each), and what every export
format makes of them: the secret redacted, provenance on every record."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from feedback_store import open_store
from feedback_store.export.export import FORMATS, export
from feedback_store.importers import claude, codex
from feedback_store.importers.imports import import_logs
from feedback_store.team.provenance import FIELDS

LOGS = Path(__file__).parent / "data" / "agent_logs"
SECRETS = ("ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8", "sk-proj-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0Fe")
CC = "claude-code-0a1b2c3d-0000-4000-8000-00000000000"
CX = "codex-5f2d0000-0000-4000-8000-00000000000"


def no_repository(_: Path) -> str | None:
    return None


def imported(db: Path) -> None:
    with open_store(db) as store:
        for module in (claude, codex):
            root = LOGS / module.AGENT
            import_logs(store, module.AGENT, module.find_files(root), lambda p, m=module: m.read(p, no_repository))


def teachback(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TEACHBACK_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, env=env, timeout=120)


def pairs(db: Path) -> dict[tuple[str, str | None, str | None], dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    rows = conn.execute("SELECT * FROM pairs").fetchall()
    conn.close()
    return {(r["session_id"], r["tool"], r["error_kind"]): dict(r) for r in rows}


def counts(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(db)
    tables = [
        r[0]
        for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'pair_search%'")
    ]
    found = {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables if t != "imports"}
    conn.close()
    return found


@pytest.fixture(scope="module")
def store_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("imported") / "feedback.db"
    imported(db)
    return db


def test_sessions_of_every_version_with_their_agent_model_and_repository(store_db: Path) -> None:
    conn = sqlite3.connect(store_db)
    rows = conn.execute(
        "SELECT id, agent, agent_version, model, repository, git_head, author FROM sessions ORDER BY id"
    )
    sessions = {r[0]: r[1:] for r in rows}
    conn.close()
    assert {s: v[:4] for s, v in sessions.items()} == {
        f"{CC}1": ("claude-code", "0.2.74", "claude-sonnet-4-20250514", None),
        f"{CC}2": ("claude-code", "1.0.33", "claude-sonnet-4-20250514", None),
        f"{CC}3": ("claude-code", "2.0.14", "claude-sonnet-4-20250514", None),
        f"{CX}1": ("codex", None, "unknown", "remote:github.com/acme/shop"),  # the old header has no version
        f"{CX}2": ("codex", "0.39.0", "gpt-5-codex", "remote:github.com/acme/shop"),
        f"{CX}3": ("codex", "0.63.0", "gpt-5.1-codex", "remote:github.com/acme/shop"),
    }
    assert sessions[f"{CX}2"][4] == "2" * 40  # the commit the log names
    assert all(v[5] and v[5].startswith("hmac-sha256:") for v in sessions.values())


def test_tool_errors_refusals_interruptions_and_failing_commands_are_pairs(store_db: Path) -> None:
    found = pairs(store_db)
    assert {(s, t, k): p["source"] for (s, t, k), p in found.items()} == {
        (f"{CC}1", "Grep", "bad_arguments"): "schema",
        (f"{CC}1", "Edit", "no_match"): "tool",
        (f"{CC}2", "Read", "not_found"): "tool",
        (f"{CC}2", "Bash", "exit_status"): "test",
        (f"{CC}3", "Write", "denied"): "user",
        (f"{CC}3", None, "interrupted"): "user",
        (f"{CC}3", "Bash", "denied"): "user",
        (f"{CX}1", "apply_patch", "no_match"): "tool",
        (f"{CX}2", "shell", "exit_status"): "test",
        (f"{CX}2", "shell", "denied"): "user",
        (f"{CX}3", "exec_command", "exit_status"): "tool",  # exit 127: the command could not run
        (f"{CX}3", None, "interrupted"): "user",
    }
    assert "Don't create a new file; put it in utils.py" in found[(f"{CC}3", "Write", "denied")]["feedback"]
    assert "use uv run pytest instead" in found[(f"{CC}3", "Bash", "denied")]["feedback"]
    assert "Never delete build/" in found[(f"{CX}2", "shell", "denied")]["feedback"]
    assert found[(f"{CC}3", None, "interrupted")]["feedback"].endswith("No, only add the function at the end")


def test_corrections_are_the_calls_that_fixed_them(store_db: Path) -> None:
    with open_store(store_db) as store:
        by_key = {(p.session_id, p.tool, p.error_kind): p for p in store.pairs()}

    def fix(key: tuple) -> dict | None:
        correction = by_key[key].correction
        return None if correction is None else json.loads(correction["tool_calls"][0]["function"]["arguments"])

    assert fix((f"{CC}2", "Read", "not_found")) == {"file_path": "/home/dev/shop/cart.py"}
    assert fix((f"{CC}1", "Grep", "bad_arguments")) == {"pattern": "total\\(", "path": "/home/dev/shop"}
    assert fix((f"{CC}1", "Edit", "no_match"))["old_string"] == "def total("
    assert fix((f"{CC}2", "Bash", "exit_status"))["new_string"] == "(1 - (discount or 0))"  # the edit that made it pass
    assert "+return a - b" in fix((f"{CX}2", "shell", "exit_status"))["input"]
    assert fix((f"{CX}3", "exec_command", "exit_status")) == {"cmd": "pytest -q", "workdir": "/home/dev/shop"}
    assert "parser.add_argument('--verbose')" in fix((f"{CX}1", "apply_patch", "no_match"))["input"]
    assert by_key[(f"{CC}3", "Write", "denied")].correction is None  # it asked for Write again: never


def test_the_agents_own_tool_names_and_their_known_schemas(store_db: Path) -> None:
    with open_store(store_db) as store:
        tools = {p.session_id: p.tools for p in store.pairs()}
    claude = {t["function"]["name"]: t for t in tools[f"{CC}2"]}
    assert sorted(claude) == ["Bash", "Edit", "Read"]
    assert claude["Edit"]["function"]["parameters"]["required"] == ["file_path", "old_string", "new_string"]
    codex = {t["function"]["name"] for t in tools[f"{CX}2"]}
    assert codex == {"shell", "apply_patch"}


def test_unknown_and_broken_lines_are_counted_and_skipped(tmp_path: Path) -> None:
    with open_store(tmp_path / "f.db") as store:
        report = import_logs(
            store,
            "claude-code",
            claude.find_files(LOGS / "claude-code"),
            lambda p: claude.read(p, no_repository),
        )
    assert report.sessions_added == 3
    assert report.skipped == {
        "lines of a type this importer does not know": 1,
        "lines that are not JSON objects": 1,
        "sub-agent (sidechain) lines": 1,
        "synthetic replies (API errors shown as replies)": 1,
    }


def test_importing_twice_adds_nothing_and_a_grown_log_adds_its_new_lines(tmp_path: Path) -> None:
    home = tmp_path / "home"
    db = tmp_path / "feedback.db"
    logs = tmp_path / "logs"
    logs.mkdir()
    source = next((LOGS / "codex").rglob("*-000000000002.jsonl"))
    log = logs / source.name
    lines = source.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:-6]))
    first = teachback("import", "codex", str(logs), "--db", str(db), home=home)
    assert first.returncode == 0, first.stderr
    assert "Imported 1 new" in first.stdout
    once = counts(db)
    again = teachback("import", "codex", str(logs), "--db", str(db), home=home)
    assert again.returncode == 0 and "(1 unchanged): 0 events, 0 feedback pairs" in again.stdout
    assert counts(db) == once
    log.write_text("".join(lines))  # the session went on
    grown = teachback("import", "codex", str(logs), "--db", str(db), home=home)
    assert "1 changed" in grown.stdout, grown.stdout
    assert counts(db)["events"] > once["events"]
    assert ("codex-5f2d0000-0000-4000-8000-000000000002", "shell", "denied") in pairs(db)
    assert counts(db)["sessions"] == 1


def test_a_missing_log_folder_says_how_to_fix(tmp_path: Path) -> None:
    done = teachback("import", "claude-code", str(tmp_path / "nowhere"), "--db", str(tmp_path / "f.db"), home=tmp_path)
    assert done.returncode == 2
    assert "does not exist" in done.stderr and "teachback import claude-code PATH" in done.stderr


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_redacts_the_secret_and_carries_provenance(store_db: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / (f"{fmt}.parquet" if FORMATS[fmt].parquet else f"{fmt}.jsonl")
    result = export([store_db], fmt, out)
    assert result.records > 0 and result.redacted_kinds.get("github_token")
    if FORMATS[fmt].parquet:
        import pyarrow.parquet as pq

        records = pq.read_table(out).to_pylist()
    else:
        records = [json.loads(line) for line in out.read_text().splitlines()]
    text = json.dumps(records)
    assert not any(secret in text for secret in SECRETS)
    assert "[REDACTED:github_token]" in text
    for record in records:
        provenance = record["provenance"]
        assert sorted(provenance) == sorted(FIELDS)
        assert provenance["agent"] in ("claude-code", "codex")
        assert provenance["content_hash"].startswith("sha256:")
        assert provenance["author"].startswith("hmac-sha256:")
        assert provenance["model"] and provenance["teachback_version"]
        assert "/home/" not in json.dumps(provenance)  # never a folder
