"""State replay and branch sampling on every executor: scripted task attempts (whose turns report
prompt token ids, as the embedded model does, so their states replay) are replayed and branched in
this process, on a local pool of two and on a local Ray cluster of two workers, with the same seeds;
the labels, the reproduction counts and the branch record files must be the same every way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.providers.scripted import ScriptError, load_script
from cli.entry import main
from tasks.branches import KINDS, BranchConfig, run_branches
from tasks.executors import ExecutorError, map_units
from tasks.rollout import run_attempt
from tasks.sample_suite import sample_suite_path
from tasks.state_eval import ReplayConfig, run_replay
from tasks.states import load_states, replayable
from tests.conftest import call, turn
from tests.tasks.test_rollout import FINISH, RESTORE, SLUGIFY, WORD_COUNT, spec

WORDZ = call("read_file", {"path": "textkit/wordz.py"})
READ = call("read_file", {"path": "textkit/words.py"})
# Three sessions, each step's prompt reported as an engine would; what each recorded does not matter.
SESSIONS = {
    "solves": (WORD_COUNT, [turn(READ), turn(WORDZ), turn(call("edit_file", RESTORE)), FINISH]),
    "gives_up": (SLUGIFY, [turn(call("read_file", {"path": "nope.py"})), FINISH]),
    "reads": (WORD_COUNT, [turn(READ), turn(call("list_files", {"path": "textkit"})), FINISH]),
}
# What the replay draws at each state (the scripted model answers by the step: every seed alike).
BEFORE = [turn(WORDZ), FINISH]
AFTER = [turn(READ), turn(call("edit_file", RESTORE))]
EVERY_WAY = (("local", 1), ("local", 2), ("ray", 2))


def with_ids(turns: list[dict]) -> list[dict]:
    return [{**t, "token_ids": {"prompt": [1, 2, 3 + n]}} for n, t in enumerate(turns)]


@pytest.fixture
def recorded(script, tmp_path: Path) -> Path:
    db = tmp_path / "feedback.db"
    for name, (task_id, turns) in SESSIONS.items():
        model = script(*with_ids(turns), name=f"{name}.json")
        record = run_attempt(spec(model, db, task_id, work_dir=str(tmp_path / name)))
        assert "error" not in record, record
    return db


@pytest.mark.timeout(600)
def test_eval_states_and_tasks_branch_give_the_same_labels_and_records_on_ray_as_in_the_local_pool(
    recorded: Path, script, tmp_path: Path
) -> None:
    pytest.importorskip("ray", reason="the Ray executor needs the ray extra: pip install 'teachback[ray]'")
    states = load_states(recorded, max_per_session=2)
    assert len({s.session_id for s in states}) == 3 and all(replayable(s) for s in states)
    arms = {"before": script(*BEFORE, name="before.json"), "after": script(*AFTER, name="after.json")}
    docs, files = {}, {}
    for executor, parallel in EVERY_WAY:
        way = f"{executor}-{parallel}"
        replay = ReplayConfig(
            db=recorded,
            arms=arms,
            task_file=sample_suite_path(),
            samples=1,
            max_per_session=2,
            executor=executor,
            parallel=parallel,
        )
        docs[way] = {k: v for k, v in run_replay(replay).items() if k not in ("wall_s", "cpu_s")}
        branch = BranchConfig(
            db=recorded,
            out=tmp_path / way,
            task_file=sample_suite_path(),
            model=arms["before"],
            samples=1,
            max_per_session=2,
            no_tool_samples=1,
            executor=executor,
            parallel=parallel,
        )
        result = run_branches(branch)
        files[way] = {kind: result.paths[kind].read_bytes() for kind in KINDS}
    here = docs["local-1"]
    kinds = {row["kind"] for rows in here["samples"]["arms"]["before"] for row in rows}
    assert {"not_found", "premature_finish"} <= kinds  # labels that running each reply decided
    assert here["states"] == len(states) and not here["reproduced"]  # other scripts than recorded
    assert docs["ray-2"] == here and docs["local-2"] == here
    assert b'"source": "repaired"' in files["local-1"]["sft"]  # wrong paths repaired and run, each way
    assert files["ray-2"] == files["local-1"] and files["local-2"] == files["local-1"]


def test_an_unknown_executor_or_token_ids_that_are_not_integers_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ExecutorError, match="give one of local, ray"):
        list(map_units(str, [1], executor="slurm"))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{**turn(READ), "token_ids": {"prompt": ["1"]}}]))
    with pytest.raises(ScriptError, match="turn 0: token_ids must be an object with prompt and/or completion"):
        load_script(str(bad))


def test_tasks_branch_on_a_local_pool_writes_the_files_it_writes_in_one_process(
    recorded: Path, script, tmp_path: Path
) -> None:
    model = script(*BEFORE, name="before.json")
    common = ["tasks", "branch", str(recorded), "--model", model, "--samples", "1", "--tasks", str(sample_suite_path())]
    assert main([*common, "--out", str(tmp_path / "here")]) == 0
    assert main([*common, "--out", str(tmp_path / "pool"), "--executor", "local", "--parallel", "2"]) == 0
    here, pool = ({k: (tmp_path / way / f"{k}.jsonl").read_bytes() for k in KINDS} for way in ("here", "pool"))
    assert here["sft"] and pool == here
    with pytest.raises(SystemExit) as refused:  # argparse names the choices
        main([*common, "--out", str(tmp_path / "x"), "--executor", "slurm"])
    assert refused.value.code == 2
