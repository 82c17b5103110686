"""Held out by task, never by session: attempts of one task share their first prompt token for token,
so a split by session would put training prompts on the held-out side. `teachback learn`'s split and
the export's both keep every attempt of a task on one side."""

from __future__ import annotations

import json
from pathlib import Path

from feedback_store.export.export import export, split_of
from tasks.records import load_tasks
from tasks.rollout import run_attempt
from tasks.sample_suite import sample_suite_path
from tasks.states import load_states
from tests.conftest import call, turn
from tests.tasks.test_rollout import FINISH, spec
from trainer.learn import task_split

FRACTION = 0.5


def test_no_state_of_a_held_out_task_reaches_training_data(script, tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    tasks = [t.instance_id for t in load_tasks(sample_suite_path())]
    sides = {split_of(t, FRACTION) for t in tasks}
    assert sides == {"train", "test"}  # the suite has tasks on both sides at this fraction
    picked = [next(t for t in tasks if split_of(t, FRACTION) == side) for side in ("train", "test")]
    picked += [t for t in tasks if t not in picked][:1]
    # Three attempts per task, each a failing read then a premature finish: states and pairs on every attempt.
    for task in picked:
        for attempt in range(3):
            replies = [turn(call("read_file", {"path": f"missing_{attempt}.py"})), FINISH]
            record = run_attempt(spec(script(*replies), db, task, attempt=attempt, work_dir=str(tmp_path / "w")))
            assert not record.get("error"), record
    by_session = {s.session_id: s.task_id for s in load_states(db)}
    split = task_split(db, FRACTION, replayable_only=False)  # scripted attempts record no prompt ids
    trained = {by_session[s] for s in split["train"]}
    held = {by_session[s] for s in split["test"]}
    assert trained and held and not trained & held
    assert split["train"] | split["test"] == set(by_session)  # every attempt is on one side

    result = export([db], "sdpo", tmp_path / "pairs.jsonl", test_fraction=FRACTION)
    found: dict[str, set[str]] = {}
    for path in result.paths:
        side = path.name.split(".")[-2]
        for line in path.read_text().splitlines():
            record = json.loads(line)
            found.setdefault(side, set()).add(by_session[record["session_id"]])
    assert found.get("train") and found.get("test") and not found["train"] & found["test"]
    assert found["test"] <= held and found["train"] <= trained
