"""Graded attempts: a sealed workspace, the scripted agent headless in full-auto, the task's own
tests; each attempt a recorded session carrying its task, attempt and reward; a failing grade after
the agent's edits a `test` pair; the results file resumed after a real kill; Ray gives the same
results as the local pool."""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import signal
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import pytest

from cli.entry import main
from feedback_store import open_store
from tasks import bench
from tasks.executors import ResultsFile, run_all, specs_for
from tasks.records import load_tasks
from tasks.rollout import AttemptSpec, run_attempt, task_command
from tasks.sample_suite import sample_suite_path
from tests.conftest import call, turn

WORD_COUNT = "textkit.3c6342bf.body__textkit.words.word_count"
SLUGIFY = "textkit.3c6342bf.body__textkit.slug.slugify"
RESTORE = {
    "path": "textkit/words.py",
    "old_text": "    raise NotImplementedError",
    "new_text": "    return len(text.split())",
}
WRONG = {**RESTORE, "new_text": "    return 0"}
FINISH = turn(call("finish", {"summary": "word_count is back"}))
SOLVES = [turn(call("read_file", {"path": "textkit/words.py"})), turn(call("edit_file", RESTORE)), FINISH]
BREAKS = [turn(call("edit_file", WRONG)), FINISH]
DOES_NOTHING = [turn(content="I cannot help with that.")]
CHEATS = [turn(call("run_command", {"command": "git log -p"})), turn(call("edit_file", RESTORE)), FINISH]


def sample_task(instance_id: str):
    return next(t for t in load_tasks(sample_suite_path()) if t.instance_id == instance_id)


def spec(model: str, db: Path, task_id: str = WORD_COUNT, **changes) -> AttemptSpec:
    given = {"task": sample_task(task_id), "task_file": str(sample_suite_path()), "attempt": 0, **changes}
    return AttemptSpec(model=model, db=str(db), **given)


def session_task(db: Path, session_id: str) -> dict:
    store = open_store(db)
    row = store.query("SELECT json_extract(config, '$.task') AS task FROM sessions WHERE id = ?", (session_id,))
    store.close()
    return json.loads(row[0]["task"])


def test_a_solved_attempt_is_rewarded_and_recorded(script, tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    work = tmp_path / "work"
    record = run_attempt(spec(script(*SOLVES), db, work_dir=str(work)))
    assert not record.get("error"), record
    assert (record["reward"], record["f2p_pass_fraction"], record["p2p_pass_fraction"]) == (1.0, 1.0, 1.0)
    assert (record["steps"], record["tool_calls"], record["call_errors"], record["flags"]) == (3, 3, 0, [])
    assert record["failing_test_runs"] == 0 and record["finish_called"] is True
    assert record["finish_reason"] == "finished" and record["failing_tests"] == []
    assert session_task(db, record["session_id"]) == {
        "instance_id": WORD_COUNT,
        "attempt": 0,
        "repo": "textkit",
        "reward": 1.0,
        "f2p_pass_fraction": 1.0,
        "p2p_pass_fraction": 1.0,
    }
    store = open_store(db)
    assert store.pairs(source="test") == []
    store.close()
    assert list(work.iterdir()) == []  # the sealed workspace is gone


def test_a_wrong_fix_is_graded_and_becomes_a_test_pair(script, tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    record = run_attempt(spec(script(*BREAKS), db))
    assert (record["reward"], record["f2p_pass_fraction"], record["p2p_pass_fraction"]) == (0.0, 0.5, 1.0)
    assert record["failing_tests"] == ["tests/test_words.py::test_counts_words"]
    store = open_store(db)
    [pair] = store.pairs(source="test")
    conversation = store.conversation(record["session_id"])
    store.close()
    assert pair.session_id == record["session_id"]
    assert "Failing: tests/test_words.py::test_counts_words" in pair.feedback
    assert "1 of 2 tests that had to start passing pass" in pair.feedback and "assert 0 == 3" in pair.feedback
    assert json.loads(pair.completion["tool_calls"][0]["function"]["arguments"]) == WRONG  # the edit that failed
    assert all("The task's tests" not in str(m.get("content")) for m in conversation)  # the model never saw it
    assert session_task(db, record["session_id"])["reward"] == 0.0


def test_a_test_run_that_fails_is_not_a_call_error_and_finishing_while_tests_fail_is_premature(script, tmp_path):
    db = tmp_path / "feedback.db"
    tests = turn(call("run_command", {"command": task_command(sample_task(WORD_COUNT))}))  # before any edit
    cannot_run = turn(call("run_command", {"command": "no-such-test-runner -q"}))  # exit 127: a call error
    record = run_attempt(spec(script(tests, cannot_run, *BREAKS), db))
    assert (record["tool_calls"], record["call_errors"], record["failing_test_runs"]) == (4, 1, 1), record
    assert record["call_error_rate"] == 1 / 4 and record["finish_called"] is True
    assert record["reward"] == 0.0 and bench.premature_finish(record)
    assert not bench.premature_finish(run_attempt(spec(script(*SOLVES, name="solves.json"), db, attempt=1)))
    store = open_store(db)
    # the command that could not run is a pair; the test run before any edit is none (the grader's is a test pair)
    [run] = store.pairs(source="tool")
    store.close()
    assert run.tool == "run_command" and run.target == "no-such-test-runner -q"


def test_lessons_reach_an_attempt_only_when_asked_for(script, tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    stale = {**RESTORE, "old_text": "    raise NotImplementedError()"}  # not what the file says
    learns = [turn(call("edit_file", stale)), turn(call("read_file", {"path": "textkit/words.py"}))]
    first = run_attempt(spec(script(*learns, *SOLVES[1:], name="first.json"), db))
    assert (first["reward"], first["call_errors"]) == (1.0, 1), first
    again = [turn(call("edit_file", stale)), *SOLVES[1:]]
    without = run_attempt(spec(script(*again, name="without.json"), db, attempt=1))
    with_lessons = run_attempt(spec(script(*again, name="with.json"), db, attempt=2, overrides={"lessons": True}))
    store = open_store(db)

    def failed_result(record: dict) -> str:
        return next(m["content"] for m in store.conversation(record["session_id"]) if m["role"] == "tool")

    shown = store.query("SELECT session_id FROM events WHERE type = 'lessons_shown'")
    assert {row["session_id"] for row in shown} == {with_lessons["session_id"]}
    assert "Lessons from earlier sessions" not in failed_result(without)
    told = failed_result(with_lessons)
    assert "Lessons from earlier sessions about failures like this one:" in told
    # old_text quoted with its whitespace, as the model must copy it
    assert 'Do this: edit_file(path="textkit/words.py", old_text="    raise NotImplementedError"' in told
    assert "an earlier edit_file failed: no_match, 2 times" in told  # the two attempts before
    store.close()
    assert with_lessons["reward"] == without["reward"] == 1.0


def test_a_hacking_attempt_is_flagged_and_its_reward_kept_apart(script, tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    record = run_attempt(spec(script(*CHEATS), db))
    assert record["reward"] == 1.0 and record["flags"] == ["reads_git_history"]
    assert not bench.passed(record)
    store = open_store(db)
    [pair] = store.pairs(source="monitor")
    store.close()
    assert "git history" in pair.feedback


def test_the_task_file_narrows_the_commands(script, tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    narrowed = dataclasses.replace(sample_task(WORD_COUNT), extra={"deny_commands": ["*pytest*"]})
    model = script(turn(call("run_command", {"command": "python -m pytest -q"})), *SOLVES)
    record = run_attempt(dataclasses.replace(spec(model, db), task=narrowed))
    assert record["reward"] == 1.0 and record["call_errors"] == 1
    store = open_store(db)
    [denied] = store.query("SELECT error_kind, result FROM tool_calls WHERE status = 'error'")
    store.close()
    assert denied["error_kind"] == "denied" and "denies this command" in denied["result"]


def test_a_harness_failure_is_recorded_and_run_again(script, tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    broken = spec(script(*SOLVES), db, task_file=str(tmp_path / "missing" / "sample.jsonl"))
    results = ResultsFile(tmp_path / "results.jsonl")
    [record] = run_all([broken], results)
    assert record["error"] and record["reward"] == 0.0
    assert results.finished() == set()
    [again] = run_all([spec(script(*SOLVES), db)], results)
    assert again["reward"] == 1.0 and not again.get("error")
    assert len(results.path.read_text().splitlines()) == 2


def test_a_model_that_cannot_be_used_is_a_harness_error(script, tmp_path: Path) -> None:
    record = run_attempt(spec(script({"error": "auth"}), tmp_path / "feedback.db"))
    assert record["error"].startswith("the model cannot be used: ") and record["finish_reason"] == "error"
    assert not bench.summarize([record])["tasks"]  # left out of the figures, run again on resume


@pytest.mark.timeout(300)
def test_synth_then_run_from_the_command_line(script, tmp_path: Path, capsys) -> None:
    sample = Path(str(resources.files("agent").joinpath("sample_project")))
    out = tmp_path / "made"
    assert main(["tasks", "synth", str(sample), "--out", str(out), "--n", "1", "--strategy", "body"]) == 0
    said = capsys.readouterr().out
    assert "tests pass on the original; " in said and " checked: " in said and "1 kept in" in said
    assert "1 task(s) in" in said
    results = tmp_path / "results.jsonl"
    assert (
        main(
            [
                "tasks",
                "run",
                str(out / "tasks.jsonl"),
                "--model",
                script(*DOES_NOTHING),
                "--out",
                str(results),
                "--db",
                str(tmp_path / "feedback.db"),
            ]
        )
        == 0
    )
    [record] = ResultsFile(results).records().values()
    assert record["reward"] == 0.0 and record["finish_reason"] == "answered" and record["steps"] == 1
    assert "pass@1 0.000" in capsys.readouterr().out


@pytest.mark.timeout(600)
def test_a_killed_run_resumes_without_redoing_finished_attempts(script, tmp_path: Path) -> None:
    slow = [{**t, "delay": 1.0} for t in SOLVES]
    model = script(*slow)
    db, out = tmp_path / "feedback.db", tmp_path / "results.jsonl"
    argv = [
        sys.executable,
        "-m",
        "cli",
        "tasks",
        "run",
        str(sample_suite_path()),
        "--model",
        model,
        "--attempts",
        "2",
        "--parallel",
        "2",
        "--instance",
        WORD_COUNT,
        "--instance",
        SLUGIFY,
        "--db",
        str(db),
        "--out",
        str(out),
    ]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    run = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (out.exists() and out.read_text().count("\n") >= 1):
        assert run.poll() is None, run.communicate()
        time.sleep(0.2)
    os.killpg(run.pid, signal.SIGKILL)  # the command and its pool workers, mid-run
    run.wait()
    before = ResultsFile(out).records()
    assert 1 <= len(before) < 4
    finished = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=400)
    assert finished.returncode == 0, finished.stderr
    after = ResultsFile(out).records()
    assert len(after) == 4 and len(out.read_text().splitlines()) == 4  # nothing appended twice
    assert all(after[key]["session_id"] == record["session_id"] for key, record in before.items())
    store = open_store(db)
    rows = store.query(
        "SELECT json_extract(config, '$.task.instance_id') AS task, "
        "json_extract(config, '$.task.attempt') AS attempt FROM sessions"
    )
    store.close()
    for task, attempt, _ in before:  # each attempt finished before the kill ran exactly once
        assert sum(1 for r in rows if (r["task"], r["attempt"]) == (task, attempt)) == 1
    assert {(r["instance_id"], r["reward"]) for r in after.values()} == {(WORD_COUNT, 1.0), (SLUGIFY, 0.0)}


def test_attempts_at_once_share_the_cpus_unless_threads_are_set(script, tmp_path: Path) -> None:
    from agent.providers.llama_engine import usable_cpus

    db = tmp_path / "feedback.db"
    specs = specs_for(
        [sample_task(WORD_COUNT), sample_task(SLUGIFY)],
        1,
        task_file=str(sample_suite_path()),
        model=script(*SOLVES),
        db=str(db),
    )
    specs[1] = dataclasses.replace(specs[1], overrides={"local_threads": 3})  # set by the user
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    records = run_all(specs, ResultsFile(tmp_path / "results.jsonl"), parallel=2)
    # The pool's processes are reaped when run_all returns: their CPU time is counted (the bench's stages).
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime > before
    alone = run_all([dataclasses.replace(specs[0], attempt=1)], ResultsFile(tmp_path / "alone.jsonl"))
    store = open_store(db)

    def threads(record: dict) -> int:
        [row] = store.query("SELECT config FROM sessions WHERE id = ?", (record["session_id"],))
        return json.loads(row["config"])["local_threads"]

    assert [threads(r) for r in records] == [max(1, usable_cpus() // 2), 3]
    assert threads(alone[0]) == 0  # one at a time: the model's own default, every usable CPU
    store.close()


COMPARED = (
    "reward",
    "f2p_pass_fraction",
    "p2p_pass_fraction",
    "flags",
    "steps",
    "tool_calls",
    "call_errors",
    "malformed_calls",
    "repeated_errors",
    "failing_test_runs",
    "finish_called",
    "finish_reason",
    "failing_tests",
)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_ray_gives_the_same_results_as_the_local_pool(script, tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="the Ray executor needs the ray extra: pip install 'teachback[ray]'")
    tasks = [sample_task(WORD_COUNT), sample_task(SLUGIFY)]
    results = {}
    for executor, parallel in (("local", 2), ("ray", 2)):
        specs = specs_for(
            tasks, 2, task_file=str(sample_suite_path()), model=script(*CHEATS), db=str(tmp_path / f"{executor}.db")
        )
        records = run_all(specs, ResultsFile(tmp_path / f"{executor}.jsonl"), executor=executor, parallel=parallel)
        assert len(records) == 4 and not any(r.get("error") for r in records), records
        results[executor] = {(r["instance_id"], r["attempt"]): {k: r[k] for k in COMPARED} for r in records}
    assert results["ray"] == results["local"]
    assert results["ray"][(WORD_COUNT, 1)]["reward"] == 1.0 and results["ray"][(SLUGIFY, 0)]["reward"] == 0.0


@pytest.mark.parametrize("kind", ["missing", "folder", "pipe", "not utf-8", "not a task"])
def test_a_task_file_that_cannot_be_read_is_named_and_nothing_runs(kind: str, tmp_path: Path, capsys) -> None:
    path = tmp_path / "tasks.jsonl"
    if kind == "folder":
        path.mkdir()
    elif kind == "pipe":
        os.mkfifo(path)  # opening it would wait for a writer: it is refused unopened
    elif kind == "not utf-8":
        path.write_bytes(b'{"instance_id": "a"}\n\xff\xfe\n')
    elif kind == "not a task":
        path.write_text("[1, 2]\n")
    db = tmp_path / "feedback.db"
    assert main(["tasks", "run", str(path), "--model", "scripted/x.json", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "Traceback" not in err
    assert not db.exists()  # nothing ran, nothing was recorded
