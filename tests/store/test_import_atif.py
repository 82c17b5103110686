"""`teachback import atif` on trajectories written from ATIF's published schema (tests/store/data/atif:
a Harbor jobs folder whose trials hold a terminus-2 and a claude-code trajectory, shaped as Harbor
writes them, each beside its result.json with the verifier's reward), hostile files, and the round
trip through `teachback export --format atif`."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from feedback_store import open_store

JOBS = Path(__file__).parent / "data" / "atif" / "trajectories" / "jobs"
TRIALS = JOBS / "2026-12-01__10-00-00"
CLAUDE = "atif-claude-code-5b1e9c3a-7d24-4f8e-b6a1-0c9d8e7f6a52"
TERMINUS = "atif-terminus-2-8d2f6a9e-3c1b-4e57-9a0d-2b7c4e1f5a63"
ROOT = Path(__file__).parents[2]


def teachback(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TEACHBACK_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, env=env, timeout=120)


def rows(db: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(db)
    found = conn.execute(sql).fetchall()
    conn.close()
    return found


def counts(db: Path) -> dict[str, int]:
    tables = ("sessions", "events", "messages", "tool_calls", "pairs", "model_calls")
    return {t: rows(db, f"SELECT count(*) FROM {t}")[0][0] for t in tables}


def pair_keys(db: Path) -> list[tuple]:
    return rows(
        db,
        "SELECT session_id, source, tool, error_kind, completion_seq, correction_seq FROM pairs ORDER BY session_id, id",
    )


@pytest.fixture(scope="module")
def jobs_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    home = tmp_path_factory.mktemp("home")
    db = home / "feedback.db"
    done = teachback("import", "atif", str(JOBS), "--db", str(db), home=home)
    return db, done


def test_each_trial_is_a_session_naming_its_agent_with_the_task_reward(jobs_db) -> None:
    db, done = jobs_db
    assert done.returncode == 0, done.stderr
    # Harbor's result.json and config.json files and the verifier's folder are not trajectories
    assert "Imported 2 new and 0 changed ATIF session(s) from 2 file(s)" in done.stdout, done.stdout
    assert done.stderr == ""
    sessions = {
        r[0]: r[1:]
        for r in rows(
            db, "SELECT id, agent, agent_version, model, frontend, json_extract(config, '$.task') FROM sessions"
        )
    }
    task = "shop-cart-discount"
    assert {s: (*v[:4], json.loads(v[4])) for s, v in sessions.items()} == {
        CLAUDE: (
            "claude-code",
            "2.0.14",
            "claude-sonnet-4-5-20250929",
            "claude-code",
            {"name": task, "reward": 0.0, "source": "harbor", "trial": f"{task}__Rm8Tz2B"},
        ),
        TERMINUS: (
            "terminus-2",
            "2.0.0",
            "openai/gpt-5-mini",
            "terminus-2",
            {"name": task, "reward": 1.0, "source": "harbor", "trial": f"{task}__Xk3Pq7A"},
        ),
    }
    # token counts of each reply, as the steps' metrics say
    assert rows(db, f"SELECT prompt_tokens, completion_tokens FROM model_calls WHERE session_id = '{TERMINUS}'")[0] == (
        812,
        64,
    )


def test_tool_errors_and_parse_errors_are_pairs_corrected_by_the_call_that_fixed_them(jobs_db) -> None:
    db, _ = jobs_db
    assert [k[:4] for k in pair_keys(db)] == [
        (CLAUDE, "tool", "Read", "not_found"),
        (CLAUDE, "tool", "Edit", "no_match"),
        (CLAUDE, "test", "Bash", "exit_status"),
        (TERMINUS, "schema", "", "malformed_call"),  # terminus-2 could not parse the reply
    ]
    with open_store(db) as store:
        by_key = {(p.session_id, p.tool, p.error_kind): p for p in store.pairs()}

    def fix(key: tuple) -> dict:
        correction = by_key[key].correction
        assert correction is not None, key
        return json.loads(correction["tool_calls"][0]["function"]["arguments"])

    assert fix((CLAUDE, "Read", "not_found")) == {"file_path": "/app/shop/cart.py"}
    assert fix((CLAUDE, "Edit", "no_match"))["old_string"] == "return sum(prices)"
    # the failing test run's correction is the edit after which it passed
    assert fix((CLAUDE, "Bash", "exit_status"))["new_string"] == "return sum(prices) * (1 - (discount or 0))"
    assert fix((TERMINUS, "", "malformed_call"))["keystrokes"].startswith("sed -i")
    parse_error = by_key[(TERMINUS, "", "malformed_call")]
    assert parse_error.feedback.startswith("Previous response had parsing errors")
    assert "sed -i" in parse_error.completion["content"]  # the reply it could not parse
    tools = {t["function"]["name"] for t in by_key[(CLAUDE, "Read", "not_found")].tools}
    assert tools == {"Read", "Edit", "Bash"}  # claude-code's own tools, with their known schemas


def test_importing_twice_adds_nothing(jobs_db, tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    shutil.copytree(JOBS, tmp_path / "jobs")
    first = teachback("import", "atif", str(tmp_path / "jobs"), "--db", str(db), home=tmp_path)
    assert first.returncode == 0, first.stderr
    once = counts(db)
    assert once["sessions"] == 2 and once["pairs"] == 4
    again = teachback("import", "atif", str(tmp_path / "jobs"), "--db", str(db), home=tmp_path)
    assert again.returncode == 0 and "(2 unchanged): 0 events, 0 feedback pairs" in again.stdout, again.stdout
    for trajectory in (tmp_path / "jobs").rglob("trajectory.json"):  # read again, same content
        os.utime(trajectory, (1, 1))
    touched = teachback("import", "atif", str(tmp_path / "jobs"), "--db", str(db), home=tmp_path)
    assert touched.returncode == 0 and "Imported 0 new and 0 changed" in touched.stdout, touched.stdout
    assert counts(db) == once


def _good(folder: Path) -> Path:
    path = folder / "good.json"
    shutil.copy(TRIALS / "shop-cart-discount__Rm8Tz2B" / "agent" / "trajectory.json", path)
    return path


def test_malformed_files_are_counted_and_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "trajectories"
    folder.mkdir()
    good = _good(folder)
    text = good.read_text()
    wrong = json.loads(text)
    wrong["steps"][1]["tool_calls"] = "Read /app/cart.py"
    newer = {**json.loads(text), "schema_version": "ATIF-v9.0"}
    missing = json.loads(text)
    del missing["steps"][1]["tool_calls"][0]["tool_call_id"]
    bad = {
        "list.json": "[1, 2, 3]",
        "deep.json": '{"steps": ' + "[" * 100_000,
        "wrong-types.json": json.dumps(wrong),
        "truncated.json": text[: len(text) // 2],
        "newer.json": json.dumps(newer),
        "missing.json": json.dumps(missing),
    }
    for name, content in bad.items():
        (folder / name).write_text(content)
    (folder / "notes.json").write_text('{"note": "not a trajectory"}')
    lines = [json.dumps({**json.loads(text), "session_id": "line-one"}), "{not json", "7"]
    (folder / "more.jsonl").write_text("\n".join(lines) + "\n")
    done = teachback("import", "atif", str(folder), "--db", str(tmp_path / "f.db"), home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert "Imported 2 new" in done.stdout and f"Skipped {len(bad)} file(s) that could not be read" in done.stdout
    assert "1 files that are not ATIF trajectories" in done.stdout
    assert "2 lines that are not JSON objects" in done.stdout and "more.jsonl:2: not JSON" in done.stdout
    said = [line.removeprefix("teachback import atif: could not read ") for line in done.stderr.splitlines()]
    problems = {line.split(": ", 1)[0]: line for line in said}
    assert set(problems) == {str(folder / name) for name in bad}, done.stderr
    assert "not a JSON object" in problems[str(folder / "list.json")]
    assert "nested more than" in problems[str(folder / "deep.json")]
    assert "`steps[1].tool_calls` is a string" in problems[str(folder / "wrong-types.json")]
    assert "not JSON" in problems[str(folder / "truncated.json")]
    assert "ATIF-v9.0 is not a version this teachback reads" in problems[str(folder / "newer.json")]
    assert "it has no `steps[1].tool_calls[0].tool_call_id`" in problems[str(folder / "missing.json")]

    good.unlink()
    (folder / "more.jsonl").unlink()
    nothing = teachback("import", "atif", str(folder), "--db", str(tmp_path / "g.db"), home=tmp_path)
    assert nothing.returncode == 2, nothing.stdout  # not one trajectory could be read
    assert "Traceback" not in nothing.stderr


def test_a_missing_path_is_named_and_left_out(tmp_path: Path) -> None:
    good = _good(tmp_path)
    done = teachback(
        "import", "atif", str(tmp_path / "nowhere"), str(good), "--db", str(tmp_path / "f.db"), home=tmp_path
    )
    assert done.returncode == 0 and "Imported 1 new" in done.stdout
    assert "nowhere does not exist" in done.stderr
    alone = teachback("import", "atif", str(tmp_path / "nowhere"), "--db", str(tmp_path / "f.db"), home=tmp_path)
    assert alone.returncode == 2 and "teachback import atif PATH" in alone.stderr


@pytest.mark.parametrize("out", ["trajectories", "trajectories.jsonl"])
def test_export_then_import_gives_back_the_sessions_pairs_and_rewards(jobs_db, tmp_path: Path, out: str) -> None:
    db, _ = jobs_db
    exported = teachback("export", "--db", str(db), "--format", "atif", "--out", str(tmp_path / out), home=tmp_path)
    assert exported.returncode == 0, exported.stderr
    if out.endswith(".jsonl"):
        assert len((tmp_path / out).read_text().splitlines()) == 2  # one trajectory per line
    else:
        assert sorted(p.name for p in (tmp_path / out).iterdir()) == [f"{CLAUDE}.json", f"{TERMINUS}.json"]
    again = tmp_path / "again.db"
    back = teachback("import", "atif", str(tmp_path / out), "--db", str(again), home=tmp_path)
    assert back.returncode == 0 and "Imported 2 new" in back.stdout, back.stdout + back.stderr
    assert pair_keys(again) == pair_keys(db)
    same = "SELECT session_id, seq, role, message FROM messages ORDER BY session_id, seq"
    assert rows(again, same) == rows(db, same)
    tasks = "SELECT id, agent, agent_version, json_extract(config, '$.task') FROM sessions ORDER BY id"
    assert rows(again, tasks) == rows(db, tasks)


def test_embedded_subagents_and_newer_versions_are_read_in_process(tmp_path: Path) -> None:
    from feedback_store.importers.atif import find_files, import_trajectories

    parent = json.loads((TRIALS / "shop-cart-discount__Rm8Tz2B" / "agent" / "trajectory.json").read_text())
    sub = {
        "schema_version": "ATIF-v1.7",
        "session_id": parent["session_id"],  # a subagent may share its parent's run id
        "trajectory_id": "explore-1",
        "agent": {"name": "claude-code-explore", "version": "2.0.14"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "Find the cart module."},
            {"step_id": 2, "source": "agent", "message": [{"type": "text", "text": "It is shop/cart.py."}]},
        ],
    }
    audio = {**parent, "schema_version": "ATIF-v1.8", "session_id": "with-audio"}  # v1.8 added audio parts
    line = {**parent, "subagent_trajectories": [sub], "steps": [*parent["steps"][:1], {**parent["steps"][1]}]}
    line["steps"][0] = {**line["steps"][0], "is_copied_context": True}
    (tmp_path / "t.jsonl").write_text(json.dumps(line) + "\n" + json.dumps(audio) + "\n")
    with open_store(tmp_path / "f.db") as store:
        report = import_trajectories(store, find_files(tmp_path))
        ids = store.session_ids()
        said = store.conversation("atif-claude-code-explore-explore-1")
    assert ids == {CLAUDE, "atif-claude-code-explore-explore-1", "atif-claude-code-with-audio"}
    assert report.sessions_added == 3 and report.skipped == {"steps copied from an earlier trajectory": 1}
    assert said[-1] == {"role": "assistant", "content": "It is shop/cart.py."}
