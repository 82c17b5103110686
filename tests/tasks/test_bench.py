"""`teachback bench`: pass@k, the rates, the table, per-task JSON and the paired comparison; the
whole command on the shipped sample suite with scripted models that solve a task or do nothing."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from cli.entry import main
from tasks import bench
from tests.tasks.test_rollout import DOES_NOTHING, SOLVES, WORD_COUNT


def brute_pass_at_k(n: int, c: int, k: int) -> float:
    """The share of k-subsets of n attempts (c of them passes) that hold a pass."""
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    return sum(any(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 7))
def test_pass_at_k_is_the_unbiased_estimate(n: int) -> None:
    for c, k in itertools.product(range(n + 1), range(1, n + 1)):
        assert bench.pass_at_k(n, c, k) == pytest.approx(brute_pass_at_k(n, c, k))
    with pytest.raises(ValueError):
        bench.pass_at_k(n, 0, n + 1)


def attempt(task: str, n: int, reward: float, **extra) -> dict:
    return {
        "instance_id": task,
        "attempt": n,
        "model": "m",
        "reward": reward,
        "f2p_pass_fraction": reward,
        "p2p_pass_fraction": 1.0,
        "flags": [],
        "steps": 4,
        "tool_calls": 10,
        "call_errors": 0,
        "malformed_calls": 0,
        "repeated_errors": 0,
        "failing_test_runs": 0,
        "finish_called": False,
        "prompt_tokens": 900,
        "completion_tokens": 100,
        "cost_usd": 0.01,
        "wall_s": 10.0,
        "agent_s": 8.0,
        "grade_s": 2.0,
        "session_id": f"{task}-{n}",
        **extra,
    }


RECORDS = [
    attempt("a", 0, 1.0, finish_called=True),
    attempt("a", 1, 0.0, call_errors=3, repeated_errors=2, failing_test_runs=2, finish_called=True),
    attempt("b", 0, 1.0, flags=["reads_git_history"]),
    attempt("b", 1, 0.0, call_errors=1, malformed_calls=1),
    attempt("c", 0, 0.0, error="worker failed"),
    attempt("c", 1, 1.0),
]


def test_summary_counts_flagged_attempts_apart_and_leaves_harness_errors_out() -> None:
    result = bench.summarize(RECORDS, k=2)
    s, tasks = result["summary"], result["tasks"]
    assert (s["tasks"], s["attempts"], s["harness_errors"]) == (3, 5, 1)
    assert tasks["a"]["pass@1"] == 0.5 and tasks["b"]["pass@1"] == 0.0 and tasks["c"]["pass@1"] == 1.0
    assert s["pass@1"] == pytest.approx(0.5) and s["pass@2"] == pytest.approx(2 / 3)  # c: 1 of 1 attempt
    assert (s["flagged"], s["flagged_rewarded"], s["flag_rules"]) == (1, 1, {"reads_git_history": 1})
    assert s["call_error_rate"] == pytest.approx(4 / 50) and s["malformed_call_rate"] == pytest.approx(1 / 50)
    assert s["repeated_error_rate"] == pytest.approx(2 / 4)
    # failing test runs are not call errors; a finish with the tests failing is premature, one with them passing not
    assert s["failing_test_runs"] == 2 and (s["premature_finishes"], s["premature_finish_rate"]) == (1, 1 / 5)
    assert s["cost_usd"] == pytest.approx(0.05) and s["steps"] == 4
    # the headline: call errors and premature finishes together, per model reply (4 steps x 5 attempts)
    assert s["failures"] == 4 + 1 and s["failure_rate"] == pytest.approx(5 / 20)
    low, high = s["pass@1_ci"]
    assert 0.0 <= low <= s["pass@1"] <= high <= 1.0
    assert tasks["b"]["flags"] == [["reads_git_history"], []] and tasks["b"]["rewards"] == [1.0, 0.0]


def test_the_table_has_every_figure() -> None:
    document = bench.bench_document(bench.summarize(RECORDS, k=2), model="openai/x", run_s=33.0)
    table = bench.render_table(document)
    for row in (
        "failures / reply",
        "pass@1",
        "pass@2",
        "call-error rate",
        "malformed-call rate",
        "repeated-error rate",
        "failing test runs",
        "premature finishes",
        "steps / attempt",
        "tokens / attempt",
        "cost",
        "wall time / attempt",
        "flagged attempts",
        "harness errors",
    ):
        assert f"| {row}" in table
    assert "| call-error rate     | 8.0% (4/50 calls) |" in table
    assert "| premature finishes  | 20.0% (1/5 attempts) |" in table
    assert "| failing test runs   | 0.4 / attempt (not call errors) |" in table
    assert "1 (1 rewarded, not counted as passes): reads_git_history ×1" in table
    assert "1,000 (900 prompt + 100 completion)" in table and "run 33 s" in table
    assert all(line.startswith("|") and line.endswith("|") for line in table.splitlines())


def document(model: str, rates: dict[str, float]) -> dict:
    return {
        "format": bench.FORMAT,
        "model": model,
        "summary": {},
        "tasks": {task: {"pass@1": rate} for task, rate in rates.items()},
    }


def test_compare_is_paired_with_a_seeded_bootstrap_interval() -> None:
    a = document("old", {"t1": 0.0, "t2": 0.5, "t3": 1.0, "t4": 0.0, "only-a": 1.0})
    b = document("new", {"t1": 1.0, "t2": 0.5, "t3": 1.0, "t4": 1.0, "only-b": 0.0})
    result = bench.compare(a, b, seed=7)
    assert [r["diff"] for r in result["rows"]] == [1.0, 0.0, 0.0, 1.0]
    assert result["mean_diff"] == 0.5 and (result["better"], result["worse"]) == (2, 0)
    low, high = result["ci"]
    assert 0.0 <= low < 0.5 < high <= 1.0
    assert bench.compare(a, b, seed=7)["ci"] == result["ci"]  # the seed fixes the interval
    assert (result["only_a"], result["only_b"]) == (["only-a"], ["only-b"])
    text = bench.render_compare(result)
    assert "| mean | 0.375 | 0.875 | +0.500 (95% CI" in text and "Only in A (left out): only-a" in text
    assert "A: `old`; B: `new`\n" in text
    assert "A: `old`; B: `old` with lessons" in bench.render_compare(bench.compare(a, {**a, "lessons": True}))
    same = bench.compare(a, a)
    assert same["mean_diff"] == 0.0 and same["ci"] == [0.0, 0.0]


def test_compare_refuses_what_bench_did_not_write(tmp_path: Path, capsys) -> None:
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"tasks": {}}))
    assert main(["bench", "--compare", str(other), str(other)]) == 2
    assert "not a `teachback bench` result" in capsys.readouterr().err


@pytest.mark.timeout(300)
def test_bench_on_the_sample_suite_with_scripted_models(script, tmp_path: Path, capsys) -> None:
    solver, idle = script(*SOLVES, name="solver.json"), script(*DOES_NOTHING, name="idle.json")
    runs = {}
    for name, model in (("solver", solver), ("idle", idle)):
        out = tmp_path / f"{name}.json"
        code = main(
            [
                "bench",
                "--suite",
                "sample",
                "--instance",
                WORD_COUNT,
                "--model",
                model,
                "--attempts",
                "2",
                "--db",
                str(tmp_path / "feedback.db"),
                "--out",
                str(out),
            ]
        )
        assert code == 0
        runs[name] = (json.loads(out.read_text()), capsys.readouterr().out)
    solved, table = runs["solver"]
    assert solved["summary"]["pass@1"] == 1.0 and solved["summary"]["pass@2"] == 1.0
    assert solved["tasks"][WORD_COUNT]["rewards"] == [1.0, 1.0] and solved["summary"]["steps"] == 3
    assert "| pass@1              | 1.000" in table and "| pass@2              | 1.000 |" in table
    assert len((tmp_path / "solver.attempts.jsonl").read_text().splitlines()) == 2
    idle_doc, idle_table = runs["idle"]
    assert idle_doc["summary"]["pass@1"] == 0.0 and idle_doc["summary"]["pass@2"] == 0.0
    assert "| pass@1              | 0.000" in idle_table
    assert main(["bench", "--compare", str(tmp_path / "idle.json"), str(tmp_path / "solver.json")]) == 0
    compared = capsys.readouterr().out
    assert f"| {WORD_COUNT} | 0.000 | 1.000 | +1.000 |" in compared
    # Asking again runs nothing: every attempt is in the results file already.
    assert (
        main(
            [
                "bench",
                "--suite",
                "sample",
                "--instance",
                WORD_COUNT,
                "--model",
                solver,
                "--attempts",
                "2",
                "--db",
                str(tmp_path / "feedback.db"),
                "--out",
                str(tmp_path / "solver.json"),
            ]
        )
        == 0
    )
    assert len((tmp_path / "solver.attempts.jsonl").read_text().splitlines()) == 2
    assert "[1/" not in capsys.readouterr().err
