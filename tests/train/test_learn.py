"""`teachback learn`: the gate refuses a worse adapter, rounds are recorded, rollback, the lock,
and a whole round (export, train, evaluate, decide) on recorded pairs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.providers.llama_engine import adapter_path, model_path, promoted_pointer
from feedback_store import open_store
from feedback_store.export.export import split_of
from feedback_store.rounds import LEARN, Round, record_round, rounds, served
from tests.train.test_eval import make_adapter, record_session

pytest.importorskip("peft")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def teachback(*args: str, timeout: float = 800) -> subprocess.CompletedProcess:
    # Replies of at most 48 tokens: the task runs of a round on the random two-layer model run to
    # the cap, and each of its tokens is a grammar check over the whole vocabulary.
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "TEACHBACK_MAX_TOKENS": "48"},
    )


def one_task(folder: Path) -> Path:
    """The sample suite's first task in a task file of its own."""
    from tasks.records import load_tasks
    from tasks.sample_suite import sample_suite_path

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "snapshots").symlink_to(sample_suite_path().parent / "snapshots")
    path = folder / "one.jsonl"
    path.write_text(load_tasks(sample_suite_path())[0].to_json() + "\n")
    return path


def promote(db: Path, folder: Path, name: str, base_dir: Path | None = None) -> Round:
    """A finished, promoted learn round, as `learn` records one, for an identity adapter on
    `base_dir` (or only a stand-in file where nothing loads it)."""
    from trainer.learn import write_pointer

    if base_dir is not None:
        make_adapter(base_dir, folder / name, 0.0)
    else:
        (folder / name).mkdir(parents=True)
    (folder / name / "adapter.gguf").write_bytes(b"stand-in")
    entry = Round(
        action=LEARN,
        adapter_id=name,
        parent=None,
        adapter_dir=str(folder / name),
        base=str(model_path("smollm2")),
        promoted=True,
        reason="test",
        finished_at=1.0,
    )
    with open_store(db) as store:
        record_round(store, entry)
    write_pointer(entry)
    return entry


def evaluation(
    errors: tuple[float, float],
    calls: tuple[float, float] = (5, 5),
    drop: float = 0.0,
    interval: tuple[float, float] | None = (-0.8, -0.2),
) -> dict:
    rate = lambda pair: {"before": pair[0], "after": pair[1]}  # noqa: E731
    error_rate = {**rate(errors), "relative_ci": None if interval is None else list(interval)}
    return {
        "behaviour": {"rates": {"call_error_rate": error_rate, "calls_per_attempt": rate(calls)}},
        "forgetting": {"general_text": {"drop": drop}, "successful_turns": {"tokens": 0}},
    }


def test_gate_promotes_only_fewer_call_errors_with_calls_kept_and_little_forgetting() -> None:
    from trainer.learn import Gate, decide

    gate = Gate(max_forgetting=0.05)
    assert decide(evaluation((0.4, 0.2)), gate)[0] is True
    refused = {
        "did not drop": evaluation((0.4, 0.4)),
        "did not drop ": evaluation((0.2, 0.3)),
        "fewer tool calls": evaluation((0.4, 0.0), calls=(6, 1)),
        "forgot too much": evaluation((0.4, 0.1), drop=0.2),
        # a lower point estimate whose interval reaches zero is not a drop (it was promoted before)
        "does not lie below zero": evaluation((0.4, 0.3), interval=(-0.6, 0.4)),
        "does not lie below zero ": evaluation((0.4, 0.3), interval=None),
    }
    for words, doc in refused.items():
        promoted, reason = decide(doc, gate)
        assert not promoted and words.strip() in reason
    assert decide({"forgetting": {}, "behaviour": {"note": "skipped"}}, gate) == (
        False,
        "no held-out task results to judge by",
    )


def test_held_out_states_decide_when_they_were_replayed() -> None:
    from tasks.state_eval import document
    from tests.tasks.test_state_eval import labels, quiet_probes, states
    from trainer.learn import Gate, decide

    found = states(24)
    probe_states = states(30, 1, "probe")
    before, after = labels(found, 2), labels(found, 6)

    def replayed(arm: list) -> dict:
        return document(
            found, {"before": before, "after": arm}, probe_states, {"before": quiet_probes(), "after": quiet_probes()}
        )

    little = {"general_text": {"drop": 0.001}, "successful_turns": {"drop": 0.0}}
    gate = Gate()
    promoted, reason = decide({"states": replayed(after), "forgetting": little}, gate)
    assert promoted and "every guard held" in reason
    promoted, reason = decide({"states": replayed(before), "forgetting": little}, gate)  # the base again
    assert not promoted and "does not lie below zero" in reason
    # forgetting is one of the guards: measured by the round, judged with the states
    promoted, reason = decide({"states": replayed(after), "forgetting": {"general_text": {"drop": 0.03}}}, gate)
    assert not promoted and "forgot too much" in reason
    # the held-out states decide even where the task runs look better
    assert not decide({**evaluation((0.4, 0.1)), "states": replayed(before)}, gate)[0]


@pytest.mark.real_model
def test_learn_refuses_to_promote_a_broken_adapter(embedded_model_dir: Path, tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    served_before = promote(db, tmp_path / "adapters", "earlier", embedded_model_dir)
    broken = make_adapter(embedded_model_dir, tmp_path / "broken", 1.0)  # huge random weights
    done = teachback(
        "learn",
        "--adapter",
        str(broken),
        "--base",
        str(embedded_model_dir),
        "--serve",
        "smollm2",
        "--db",
        str(db),
        "--tasks",
        str(one_task(tmp_path / "tasks")),
        "--max-steps",
        "2",
    )
    assert done.returncode == 1, done.stderr[-3000:]
    assert "kept earlier" in done.stdout and "forgot too much" in done.stdout
    with open_store(db) as store:
        history = rounds(store)
        assert served(store).adapter_id == "earlier"
    refused = history[-1]
    assert refused.action == LEARN and not refused.promoted and refused.parent == "earlier"
    assert refused.metrics["forgetting"]["general_text"]["drop"] > 0.05
    evaluation_doc = json.loads(Path(refused.metrics["eval"]).read_text())
    assert evaluation_doc["behaviour"]["note"].startswith("skipped: it forgot too much")  # no slow task runs
    assert json.loads(promoted_pointer().read_text())["adapter_id"] == "earlier"
    assert adapter_path("promoted", model_path("smollm2")) == Path(served_before.adapter_dir) / "adapter.gguf"


def test_rollback_returns_to_the_adapter_before_then_to_the_base_model(tmp_path: Path) -> None:
    db = tmp_path / "feedback.db"
    first = promote(db, tmp_path / "adapters", "first")
    promote(db, tmp_path / "adapters", "second")
    gguf = model_path("smollm2")
    assert adapter_path("promoted", gguf) == tmp_path / "adapters" / "second" / "adapter.gguf"

    done = teachback("learn", "--rollback", "--db", str(db), timeout=120)
    assert done.returncode == 0 and "now serving first (was second)" in done.stdout
    assert adapter_path("promoted", gguf) == Path(first.adapter_dir) / "adapter.gguf"
    done = teachback("learn", "--rollback", "--db", str(db), timeout=120)
    assert done.returncode == 0 and "the base model" in done.stdout
    assert not promoted_pointer().exists() and adapter_path("promoted", gguf) is None
    done = teachback("learn", "--rollback", "--db", str(db), timeout=120)
    assert done.returncode == 1 and "nothing to roll back" in done.stdout
    history = teachback("learn", "--history", "--db", str(db), timeout=120).stdout.splitlines()
    assert [line.split()[1] for line in history] == ["learn", "learn", "rollback", "rollback"]


def test_a_second_learn_exits_busy_and_an_empty_store_trains_nothing(tmp_path: Path) -> None:
    from trainer.learn import EXIT_BUSY, adapters_dir, learn_lock

    db = tmp_path / "feedback.db"
    open_store(db).close()
    with learn_lock():
        done = teachback("learn", "--db", str(db), "--serve", "smollm2", timeout=120)
    assert done.returncode == EXIT_BUSY and "another `teachback learn` is running (pid" in done.stderr
    with open_store(db) as store:  # a round whose process was killed
        record_round(store, Round(action=LEARN, adapter_id="killed", parent=None))
    done = teachback("learn", "--db", str(db), "--serve", "smollm2", timeout=120)
    assert done.returncode == 1 and "0 new training pair(s)" in done.stdout
    assert [p.name for p in adapters_dir().iterdir()] == ["learn.lock"]  # no round folder left behind
    with open_store(db) as store:
        (killed,) = rounds(store)
    assert killed.finished_at is not None and killed.reason.startswith("interrupted") and not killed.promoted


def test_a_round_exports_trains_evaluates_and_records(tiny_model_dir: Path, tiny_gguf: Path, tmp_path: Path) -> None:
    """A whole round's mechanics, on the two-layer model and its GGUF file (the embedded model's
    round is tests/train/test_demo_learn.py's)."""
    db = tmp_path / "feedback.db"
    splits: set[str] = set()
    for n in range(12):  # sessions on both sides of the split: their ids are random, so record until they are
        record_session(db, tmp_path / f"proj{n}", tmp_path / f"script{n}.json")
        with open_store(db) as store:
            splits = {split_of(s.id, 0.5) for s in store.list_sessions()}
        if n >= 2 and splits == {"train", "test"}:
            break
    assert splits == {"train", "test"}
    done = teachback(
        "learn",
        "--base",
        str(tiny_model_dir),
        "--serve",
        str(tiny_gguf),
        "--db",
        str(db),
        "--tasks",
        str(one_task(tmp_path / "tasks")),
        "--max-steps",
        "2",
        "--min-pairs",
        "1",
        "--train-steps",
        "1",
        "--test-fraction",
        "0.5",
    )
    assert done.returncode in (0, 1), done.stderr[-3000:]
    assert "step 1/1: loss" in done.stderr
    with open_store(db) as store:
        (entry,) = rounds(store)
    assert entry.finished_at is not None and entry.records >= 1 and entry.data_hash.startswith("sha256:")
    assert entry.promoted == (done.returncode == 0)
    rates = entry.metrics["rates"]
    assert {"call_error_rate", "repeated_error_rate", "pass@1"} <= set(rates)
    assert ("call-error rate" in entry.reason) or ("forgot" in entry.reason)
    adapter = Path(entry.adapter_dir)
    assert (adapter / "adapter.gguf").is_file() and (adapter / "teachback_train.json").is_file()
