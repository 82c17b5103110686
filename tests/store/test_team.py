"""Team datasets: sharing (per session, repository and allowed workspace) and `export --shared-only`,
`teachback merge`, the ATIF export against the format's published schema, and the hub folder."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from feedback_store import open_store
from feedback_store.export.atif import export_atif
from feedback_store.importers import claude, codex
from feedback_store.importers.imports import import_logs
from feedback_store.team.merge import merge
from feedback_store.team.sharing import resolve, set_share
from tests.store.test_import_agents import CC, CX, SECRETS

DATA = Path(__file__).parent / "data"
SCHEMA = json.loads((DATA / "atif" / "atif-v1.7.schema.json").read_text())
MERGED = ("sessions", "events", "messages", "turns", "model_calls", "tool_calls", "approvals", "pairs", "blobs")


def import_into(db: Path, agent_module, identify=lambda _: None) -> None:
    with open_store(db) as store:
        files = agent_module.find_files(DATA / "agent_logs" / agent_module.AGENT)
        import_logs(store, agent_module.AGENT, files, lambda p: agent_module.read(p, identify))


def teachback(*args: str, home: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TEACHBACK_HOME": str(home), "PYTHONPATH": str(Path(__file__).parents[2])}
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], capture_output=True, text=True, env=env, timeout=120, cwd=cwd
    )


def dump(db: Path, tables: tuple[str, ...] = MERGED) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(db)
    found = {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}
    conn.close()
    return found


@pytest.fixture
def two_stores(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "alice.db", tmp_path / "bob.db"
    import_into(a, claude)
    import_into(b, codex)
    return a, b


def test_nothing_is_shared_until_the_user_shares_it(two_stores: tuple[Path, Path], tmp_path: Path) -> None:
    a, _ = two_stores
    out = tmp_path / "out" / "sdpo.jsonl"
    refused = teachback("export", "--db", str(a), "--format", "sdpo", "--out", str(out), "--shared-only", home=tmp_path)
    assert refused.returncode == 2 and not out.exists()
    assert "not shared" in refused.stderr
    shared = teachback("share", f"{CC}2", "--db", str(a), home=tmp_path)
    assert shared.returncode == 0, shared.stderr
    done = teachback("export", "--db", str(a), "--format", "sdpo", "--out", str(out), "--shared-only", home=tmp_path)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["session_id"] for r in records} == {f"{CC}2"}
    card = (out.parent / "README.md").read_text()
    assert "not shared: no share setting covers it (sharing is off until `teachback share`): 5" in card
    assert "--shared-only" in card
    unshared = teachback("unshare", f"{CC}2", "--db", str(a), home=tmp_path)
    assert unshared.returncode == 0
    with open_store(a) as store:
        assert not resolve(store.query)[f"{CC}2"].shared


def test_share_needs_a_known_session_and_says_where_to_look(two_stores: tuple[Path, Path], tmp_path: Path) -> None:
    done = teachback("share", "no-such-session", "--db", str(two_stores[0]), home=tmp_path)
    assert done.returncode == 1
    assert "no session no-such-session" in done.stderr and "teachback stats" in done.stderr


def test_a_repository_setting_covers_every_clone_and_a_session_setting_wins(git_repo: Path, tmp_path: Path) -> None:
    from agent.runtime import repository_identity

    db = tmp_path / "f.db"
    logs = tmp_path / "logs"
    shutil.copytree(DATA / "agent_logs" / "claude-code", logs)
    for log in logs.rglob("*.jsonl"):  # the sessions ran in this repository
        log.write_text(log.read_text().replace('"/home/dev/shop"', json.dumps(str(git_repo))))
    with open_store(db) as store:
        import_logs(store, "claude-code", claude.find_files(logs), lambda p: claude.read(p, repository_identity))
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(git_repo), str(clone)], check=True)
    done = teachback("share", "--repository", "--db", str(db), home=tmp_path, cwd=clone)
    assert done.returncode == 0, done.stderr
    teachback("unshare", f"{CC}1", "--db", str(db), home=tmp_path)
    with open_store(db) as store:
        states = resolve(store.query)
    assert {s: v.shared for s, v in states.items()} == {f"{CC}1": False, f"{CC}2": True, f"{CC}3": True}
    outside = teachback("share", "--repository", str(tmp_path), "--db", str(db), home=tmp_path)
    assert outside.returncode == 1 and "not in a git repository" in outside.stderr


def test_a_workspace_file_shares_only_once_the_user_allowed_the_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "shop"
    workspace.mkdir()
    (workspace / "teachback.toml").write_text("[teachback]\nshare = true\n")
    db = tmp_path / "f.db"
    logs = tmp_path / "logs"
    shutil.copytree(DATA / "agent_logs" / "codex", logs)
    for log in logs.rglob("*.jsonl"):
        log.write_text(log.read_text().replace('"/home/dev/shop"', json.dumps(str(workspace))))
    with open_store(db) as store:
        import_logs(store, "codex", codex.find_files(logs), lambda p: codex.read(p, lambda _: None))
        before = resolve(store.query)
        set_share(store, "workspace", str(workspace), True, "allowed")
        after = resolve(store.query)
    assert not any(s.shared for s in before.values())
    # The old log names no cwd: its session was not recorded in that workspace.
    assert {s: v.shared for s, v in after.items()} == {f"{CX}1": False, f"{CX}2": True, f"{CX}3": True}
    assert "teachback.toml" in after[f"{CX}2"].reason


def test_merge_twice_gives_the_same_database_whatever_the_order(two_stores: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = two_stores
    with open_store(a) as store:
        set_share(store, "session", f"{CC}2", True, "shared with teachback share")
    team, other = tmp_path / "team.db", tmp_path / "other.db"
    done = teachback("merge", str(a), str(b), "--into", str(team), home=tmp_path)
    assert done.returncode == 0, done.stderr
    first = dump(team, (*MERGED, "share_settings"))
    again = teachback("merge", str(a), str(b), "--into", str(team), home=tmp_path)
    assert "nothing new" in again.stdout
    assert dump(team, (*MERGED, "share_settings")) == first
    merge([b, a], other)
    assert dump(other, (*MERGED, "share_settings")) == first
    assert {r[0] for r in first["sessions"]} == {f"{CC}{i}" for i in (1, 2, 3)} | {f"{CX}{i}" for i in (1, 2, 3)}
    conn = sqlite3.connect(team)
    authors = dict(conn.execute("SELECT id, author FROM sessions"))
    shared = dict(conn.execute("SELECT key, shared FROM share_settings WHERE scope = 'session'"))
    conn.close()
    with open_store(a) as store:
        assert authors[f"{CC}1"] == store.query("SELECT author FROM sessions WHERE id = ?", (f"{CC}1",))[0]["author"]
    assert shared[f"{CC}2"] == 1 and shared[f"{CX}2"] == 0


def test_merge_shared_only_leaves_unshared_sessions_and_their_files_behind(
    two_stores: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = two_stores
    with open_store(b) as store:
        set_share(store, "session", f"{CX}3", True, "shared")
    team = tmp_path / "team.db"
    merge([a, b], team, shared_only=True)
    text = team.read_bytes()
    assert not any(secret.encode() in text for secret in SECRETS)  # the .env was read in unshared sessions
    assert [r[0] for r in dump(team, ("sessions",))["sessions"]] == [f"{CX}3"]


def test_atif_export_validates_against_the_published_schema(two_stores: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "trajectories.jsonl"
    count, left, path, card = export_atif(list(two_stores), out)
    trajectories = [json.loads(line) for line in path.read_text().splitlines()]
    assert count == len(trajectories) == 6 and not left
    validator = jsonschema.Draft202012Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
    for trajectory in trajectories:
        validator.validate(trajectory)
        steps = trajectory["steps"]
        assert [s["step_id"] for s in steps] == list(range(1, len(steps) + 1))
        for step in steps:
            calls = {c["tool_call_id"] for c in step.get("tool_calls") or []}
            assert {r["source_call_id"] for r in (step.get("observation") or {}).get("results", [])} <= calls
        assert trajectory["extra"]["provenance"]["content_hash"].startswith("sha256:")
    text = path.read_text()
    assert not any(secret in text for secret in SECRETS) and "[REDACTED:" in text
    claude = next(t for t in trajectories if t["session_id"] == f"{CC}2")
    assert claude["agent"] == {**claude["agent"], "name": "claude-code", "version": "1.0.33"}
    failed = [p for s in claude["steps"] for p in (s.get("extra") or {}).get("feedback_pairs", [])]
    assert {(p["tool"], p["error_kind"]) for p in failed} == {("Read", "not_found"), ("Bash", "exit_status")}
    assert all(isinstance(p["correction_step"], int) for p in failed)
    assert claude["steps"][1]["metrics"]["prompt_tokens"] == 2112  # input + cache read + cache creation
    assert "atif" in card.read_text()


def test_atif_keeps_the_embedded_models_token_ids(tmp_path: Path) -> None:
    from agent.protocol import AssistantMessage, ModelUsage, SessionStarted, TurnStarted
    from feedback_store import Recorder

    db = tmp_path / "f.db"
    with open_store(db) as store:
        Recorder(store).record_many(
            [
                SessionStarted(
                    session_id="s1",
                    workspace="/w",
                    model="local/smollm2",
                    frontend="cli",
                    system_prompt="sys",
                    tools=[],
                ),
                TurnStarted(session_id="s1", turn=1, text="hi", message={"role": "user", "content": "hi"}),
                AssistantMessage(session_id="s1", id="a1", step=1, message={"role": "assistant", "content": "hello"}),
                ModelUsage(
                    session_id="s1",
                    cause_id="a1",
                    model="local/smollm2",
                    step=1,
                    prompt_tokens=3,
                    completion_tokens=2,
                    cost_usd=0.0,
                    latency_ms=5.0,
                    prompt_token_ids=[1, 2, 3],
                    completion_token_ids=[7, 8],
                    logprobs=[{"token": "hel", "logprob": -0.5}, {"token": "lo", "logprob": -0.25}],
                ),
            ]
        )
    _, _, path, _ = export_atif([db], tmp_path / "t.jsonl")
    trajectory = json.loads(path.read_text())
    jsonschema.Draft202012Validator(SCHEMA).validate(trajectory)
    agent = [s for s in trajectory["steps"] if s["source"] == "agent"][0]
    assert agent["metrics"]["prompt_token_ids"] == [1, 2, 3]
    assert agent["metrics"]["completion_token_ids"] == [7, 8]
    assert agent["metrics"]["logprobs"] == [-0.5, -0.25]
    assert trajectory["agent"]["name"] == "teachback"


def test_the_hub_folder_loads_with_datasets(two_stores: tuple[Path, Path], tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    a, b = two_stores
    folder = tmp_path / "hub"
    args = (
        "export",
        "--db",
        str(a),
        str(b),
        "--format",
        "sdpo",
        "--out",
        str(folder),
        "--hub",
        "--license",
        "cc-by-4.0",
    )
    done = teachback(*args, "--test-fraction", "0.4", home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (folder / ".teachback-staging").exists()
    readme = (folder / "README.md").read_text()
    header = readme.split("---")[1]
    for line in (
        "license: cc-by-4.0",
        "task_categories:\n- text-generation",
        "size_categories:\n- n<1K",
        "source_datasets:",
    ):
        assert line in header
    assert "Left out:" in readme
    loaded = datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "hf-cache"))
    assert set(loaded) == {"train", "test"}
    rows = [*loaded["train"], *loaded["test"]]
    assert len(rows) == 12
    assert all(r["provenance"]["agent"] in ("claude-code", "codex") for r in rows)
    assert all(r["prompt"][0]["role"] == "system" for r in rows)
    assert not any(secret in json.dumps(rows) for secret in SECRETS)
