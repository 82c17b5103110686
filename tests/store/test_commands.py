"""`teachback export` and `teachback stats` as a user runs them: messages, exit codes, no tracebacks."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli.export import (
    ProgressBar,
    add_export_arguments,
    add_stats_arguments,
    export_main,
    stats_main,
)
from feedback_store import Recorder, open_store
from feedback_store.stats import format_stats
from tests.store.events import FakeSession, mixed_session


def parse(add, argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add(parser)
    return parser.parse_args(argv)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "f.db"
    store = open_store(path)
    failing = FakeSession(model="m/two").start().user("x")
    failing.call("read_file", {"path": "a"}, ok=False, error_kind="not_found", target="a", result="no a")
    Recorder(store).record_many(mixed_session(model="m/one").events + failing.finish().events)
    store.close()
    return path


def test_stats_json(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert stats_main(parse(add_stats_arguments, ["--db", str(db), "--json"])) == 0
    stats = json.loads(capsys.readouterr().out)
    # 4 failed calls: 3 call errors (no_match, unknown_tool, not_found) and a failing test run
    assert stats["sessions"] == 2 and stats["tool_calls"] == 10 and stats["call_errors"] == 3
    assert stats["call_error_rate"] == 0.3 and stats["failing_test_runs"] == 1
    assert stats["call_error_rate_by_tool"]["run_command"] == {"calls": 2, "call_errors": 0, "call_error_rate": 0.0}
    assert stats["call_error_rate_by_tool"]["edit_file"] == {"calls": 4, "call_errors": 1, "call_error_rate": 0.25}
    assert (
        stats["call_errors_by_kind"]["unknown_tool"]["count"] == 1 and "exit_status" not in stats["call_errors_by_kind"]
    )
    assert stats["call_error_rate_by_model"]["m/two"] == {"calls": 1, "call_errors": 1, "call_error_rate": 1.0}
    assert (stats["graded_sessions"], stats["premature_finishes"]) == (0, 0)
    assert stats["pairs_by_source"] == {"lint": 1, "schema": 1, "test": 1, "tool": 2}
    assert stats["pairs_corrected"] == 4 and stats["share_corrected"] == 0.8


def test_stats_text(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert stats_main(parse(add_stats_arguments, ["--db", str(db)])) == 0
    out = capsys.readouterr().out
    assert "Tool calls: 10  call errors: 3 (30.0%)  failing test runs: 1" in out
    assert "with a correction: 4 (80.0%)" in out


def test_stats_on_a_corrupt_file_is_a_message_not_a_traceback(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"garbage " * 1000)
    assert stats_main(parse(add_stats_arguments, ["--db", str(bad)])) == 1
    err = capsys.readouterr().err
    assert "Move it aside" in err and "Traceback" not in err


def test_export_writes_and_summarises(db: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out.jsonl"
    args = parse(add_export_arguments, ["--db", str(db), "--format", "dpo", "--out", str(out), "--model", "m/one"])
    assert export_main(args) == 0
    assert len(out.read_text().splitlines()) == 4
    assert "Wrote 4 dpo records" in capsys.readouterr().out


def test_export_errors_exit_non_zero(db: Path, tmp_path: Path, capsys) -> None:
    args = parse(add_export_arguments, ["--db", str(db), "--format", "csv", "--out", str(tmp_path / "o")])
    assert export_main(args) == 1
    assert "Unknown export format 'csv'" in capsys.readouterr().err
    args = parse(
        add_export_arguments, ["--db", str(tmp_path / "none.db"), "--format", "sdpo", "--out", str(tmp_path / "o")]
    )
    assert export_main(args) == 1
    assert "No feedback database" in capsys.readouterr().err


def test_several_databases_and_flags_parse() -> None:
    args = parse(
        add_export_arguments,
        [
            "--db",
            "a.db",
            "b.db",
            "--db",
            "c.db",
            "--format",
            "sft",
            "--out",
            "o",
            "--no-redact",
            "--include-flagged",
            "--test-fraction",
            "0.1",
        ],
    )
    assert args.db == ["a.db", "b.db", "c.db"] and args.no_redact and args.include_flagged
    assert args.test_fraction == 0.1


def test_progress_bar_only_for_long_exports() -> None:
    stream = io.StringIO()
    bar = ProgressBar(stream)
    bar(10, 10)
    assert stream.getvalue() == ""
    bar(5000, 5000)
    bar.clear()
    assert "5000/5000 pairs" in stream.getvalue() and stream.getvalue().endswith("\n")


def test_importing_the_commands_is_light() -> None:
    code = (
        "import sys, cli.export; print(sorted(m for m in ('sqlite_utils', 'litellm', 'pyarrow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_stats_count_call_errors_failing_tests_and_premature_finishes_as_the_bench_does(tmp_path: Path) -> None:
    store = open_store(tmp_path / "f.db")
    for reward in (0.0, 1.0):
        s = FakeSession().start().user("fix it")
        s.call(
            "run_command",
            {"command": "pytest"},
            ok=False,
            error_kind="exit_status",
            target="pytest",
            result="$ pytest\n[exit code 1]\n1 failed",
            exit_code=1,
        )
        s.call(
            "run_command",
            {"command": "tox"},
            ok=False,
            error_kind="exit_status",
            target="tox",
            result="$ tox\n[exit code 127]\ntox: not found",
            exit_code=127,
        )
        s.call("finish", {"summary": "done"}, result="Finished.")
        Recorder(store).record_many(s.finish().events)
        with store.write() as conn:  # as a graded task attempt is marked (tasks.rollout.mark_session)
            conn.execute(
                "UPDATE sessions SET config = json_set(config, '$.task', json(?)) WHERE id = ?",
                (json.dumps({"reward": reward}), s.id),
            )
    stats = store.stats()
    assert (stats["tool_calls"], stats["call_errors"], stats["failing_test_runs"]) == (6, 2, 2)
    assert stats["call_errors_by_kind"] == {"exit_status": {"count": 2, "share_of_calls": round(2 / 6, 4)}}
    assert (stats["graded_sessions"], stats["premature_finishes"]) == (2, 1)
    assert "Premature finishes: 1 of 2 graded task sessions" in format_stats(stats)
    # the headline counts both: 2 call errors and 1 premature finish, per model call
    assert stats["failures"] == 3 and stats["failure_rate"] == round(3 / stats["model_calls"], 4)
    assert f"Failures: 3 ({stats['failure_rate']:.1%} of model calls)" in format_stats(stats)
