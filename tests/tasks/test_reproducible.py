"""An attempt is reproducible by construction: the same task, attempt and seed give byte-identical
prompts and the same samples; attempts differ by their seed, never by a random temporary path."""

from __future__ import annotations

from pathlib import Path

import pytest

from feedback_store import open_store
from feedback_store.content.renders import Renders
from tasks.rollout import run_attempt
from tests.tasks.test_rollout import SOLVES, spec


def session_calls(db: Path, session_id: str) -> list[tuple[list[int], list[int]]]:
    """(prompt token ids, sampled token ids) of each model call of the session, in order."""
    store = open_store(db)
    try:
        renders = Renders(store)
        seqs = [
            r["seq"]
            for r in store.query(
                "SELECT seq FROM messages WHERE session_id = ? AND role = 'assistant' ORDER BY seq", (session_id,)
            )
        ]
        found = [renders.at(session_id, seq) for seq in seqs]
    finally:
        store.close()
    return [(r.prompt_token_ids, r.completion_token_ids) for r in found if r is not None]


def session_start(db: Path, session_id: str) -> tuple[str, str, dict]:
    """The recorded session's workspace path, system prompt and settings."""
    store = open_store(db)
    try:
        started = store.events(session_id)[0]
    finally:
        store.close()
    assert started["type"] == "session_started"
    return started["workspace"], started["system_prompt"], started["config"]


def test_an_attempt_runs_at_the_same_path_with_its_number_as_seed(script, tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    work = tmp_path / "work"
    first = run_attempt(spec(script(*SOLVES), db, work_dir=str(work), attempt=3))
    again = run_attempt(spec(script(*SOLVES), db, work_dir=str(work), attempt=3))
    (path_a, prompt_a, config_a), (path_b, prompt_b, config_b) = (
        session_start(db, first["session_id"]),
        session_start(db, again["session_id"]),
    )
    assert (
        path_a == path_b
        and Path(path_a).parent.name.startswith("teachback-textkit.")
        and path_a.endswith("-3/workspace")
    )
    assert prompt_a == prompt_b and str(work) not in prompt_a  # the prompt names the folder, not its path
    assert "working in the repository `workspace`" in prompt_a
    assert config_a["seed"] == config_b["seed"] == 3
    other = run_attempt(spec(script(*SOLVES), db, work_dir=str(work), attempt=4))
    assert session_start(db, other["session_id"])[2]["seed"] == 4
    assert not list(work.iterdir())  # each attempt's folder is removed after it


def test_a_taken_folder_name_gets_a_fresh_one(script, tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    work = tmp_path / "work"
    kept = run_attempt(spec(script(*SOLVES), db, work_dir=str(work), keep_workspace=True))
    second = run_attempt(spec(script(*SOLVES), db, work_dir=str(work), keep_workspace=True))
    assert kept["reward"] == second["reward"] == 1.0
    assert kept["workspace"] != second["workspace"]
    assert Path(second["workspace"]).parent.name.startswith(Path(kept["workspace"]).parent.name + "-")


@pytest.mark.slow
@pytest.mark.real_model
@pytest.mark.timeout(600)
def test_the_same_seeded_attempt_samples_the_same_and_another_seed_differs(tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    settings = {"max_steps": 2, "temperature": 0.9, "max_tokens": 48, "repo_map_tokens": 256, "local_threads": 1}
    runs = [
        run_attempt(spec("local/smollm2@none", db, work_dir=str(tmp_path / "w"), attempt=a, overrides=settings))
        for a in (0, 0, 1)
    ]
    assert all("error" not in r for r in runs), runs
    first, again, other = (session_calls(db, r["session_id"]) for r in runs)
    assert first and all(prompt and reply for prompt, reply in first)
    assert first == again  # byte-identical prompt tokens at every step, and the same samples
    assert first[0][0] == other[0][0]  # the same first prompt ...
    assert first[0][1] != other[0][1]  # ... sampled differently under another seed
