"""A database recorded before tool calls had their roles, exit code, finishing event and hook verdict
as columns (tests/store/data/before_call_columns.db, made by record_before_call_columns.py with the
code of that time): migrated with today's code, it gives the same pairs, corrections, stats and
export records as that code read from it (before_call_columns.json)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.store.data.record_before_call_columns import DB, FIGURES, figures

pytestmark = pytest.mark.timeout(300)  # every export format, on a busy machine


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("backfill")
    db = folder / "feedback.db"
    shutil.copy(DB, db)
    return db, json.loads(json.dumps(figures(db, folder), sort_keys=True, default=str))


@pytest.fixture(scope="module")
def before() -> dict:
    return json.loads(FIGURES.read_text(encoding="utf-8"))


def test_the_migrated_database_gives_the_same_pairs_and_corrections(migrated, before) -> None:
    _, now = migrated
    assert len(now["pairs"]) == len(before["pairs"]) == 18
    for was, is_ in zip(before["pairs"], now["pairs"], strict=True):
        fix = is_.pop("fix", None)
        assert is_ == was, was["id"]
        assert (fix is not None) == (was["corrected_at"] is not None and was["source"] != "user"), was["id"]


def test_the_migrated_database_gives_the_same_stats(migrated, before) -> None:
    _, now = migrated
    assert {k: v for k, v in now["stats"].items() if k != "database"} == {
        k: v for k, v in before["stats"].items() if k != "database"
    }


@pytest.mark.parametrize("fmt", sorted(json.loads(FIGURES.read_text(encoding="utf-8"))["exports"]))
def test_the_migrated_database_exports_the_same_records(migrated, before, fmt: str) -> None:
    _, now = migrated
    assert now["exports"][fmt] == before["exports"][fmt]


def test_the_columns_are_filled_from_the_recorded_events(migrated) -> None:
    db, _ = migrated
    conn = sqlite3.connect(db)
    rows = {
        call_id: (roles, exit_code, blocked)
        for call_id, roles, exit_code, blocked in conn.execute(
            "SELECT call_id, roles, exit_code, blocked_by_hook FROM tool_calls WHERE session_id NOT LIKE 's-%'"
        )
    }
    finished = conn.execute(
        "SELECT count(*) FROM tool_calls t JOIN events e ON e.id = t.finished_id AND e.type = 'tool_call_finished'"
    ).fetchone()[0]
    calls = conn.execute("SELECT count(*) FROM tool_calls").fetchone()[0]
    conn.close()
    assert json.loads(rows["c1"][0])["command"] == "command"  # the command tool's declared roles
    assert rows["c1"][2] == 1 and rows["c2"][2] == 0  # the hook blocked the first call only
    assert rows["c3"][1] == 127 and rows["c4"][1] == 0  # the shell could not run it; it ran
    assert rows["c8"][1] == 1 and rows["c10"][1] == 0  # the test failed, then passed
    assert rows["c5"][1] is None  # not a command
    assert finished == calls
