"""Every export format's output for one small recorded database, compared with the output the
exporters gave for it when the snapshot was taken: a change meant to make exporting faster must
leave every byte as it was. After a deliberate change to a format, regenerate with
`pytest tests/store/test_export_golden.py --snapshot-update` and review the diff.

The database is recorded from hand-made sessions whose ids, times and author are fixed, so it is
the same database on every machine and every run.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest

from agent.protocol import Event, SessionStarted
from feedback_store import Recorder, open_store
from feedback_store.export.export import FORMATS, export
from feedback_store.team.provenance import teachback_version
from tests.store.events import FakeSession, edit, mixed_session
from tests.store.test_export_formats import with_reviews

pytestmark = pytest.mark.timeout(120)

SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"  # a GitHub token shape the redactor knows
ID_FIELDS = ("id", "cause_id", "edit_id", "request_id")


def reviewed_session() -> FakeSession:
    s = with_reviews(FakeSession(session_id="s-reviewed", ts=1_750_100_000.0).start().user("tidy the files"))
    s.call(
        "edit_file",
        {"path": "c.py", "old_text": "1", "new_text": "2"},
        target="c.py",
        edits=[edit("c.py", "c = 1\n", "c = 2\n", edit_id="fix1")],
    )
    s.review("fix1", "c.py", "corrected", comment="use 3", user_content="c = 3\n")
    s.call(
        "run_command",
        {"command": "rm -rf build"},
        ok=False,
        error_kind="denied",
        target="rm -rf build",
        result="The user denied this command.",
        denied_by_user="not the build folder",
    )
    s.call(
        "read_file",
        {"path": ".env"},
        target=".env",
        result=f"TOKEN={SECRET}\n",
    )
    s.call("read_file", {"path": "missing.py"}, ok=False, error_kind="not_found", target="missing.py", result="No.")
    s.call("read_file", {"path": "a.py"}, target="a.py", result="y = 1\n")
    return s.finish()


def fixed(events: list[Event]) -> list[Event]:
    """The events with every generated id replaced by a number in order of appearance."""
    names: dict[str, str] = {}

    def name(value: str | None) -> str | None:
        if value is None:
            return None
        return names.setdefault(value, f"{len(names):04d}") if len(value) >= 32 else value

    return [dataclasses.replace(e, **{f: name(getattr(e, f)) for f in ID_FIELDS if hasattr(e, f)}) for e in events]


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("golden") / "feedback.db"
    sessions = [
        mixed_session(session_id="s-mixed-1"),
        mixed_session(session_id="s-mixed-2", task=f"Fix the greeting; the key is {SECRET}"),
        reviewed_session(),
    ]
    events = [e for s in sessions for e in s.events]
    system = f"You are a careful coding agent. Deploy with {SECRET}."  # one secret every session shares
    events = [dataclasses.replace(e, system_prompt=system) if isinstance(e, SessionStarted) else e for e in events]
    with open_store(path) as store:
        Recorder(store).record_many(fixed(events))
        with store.write() as conn:  # the author hash is of this user and machine
            conn.execute("UPDATE sessions SET author = 'author-hash'")
    return path


def exported(path: Path) -> str:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq  # the file's bytes name the pyarrow version; its rows are the output

        text = "\n".join(json.dumps(row, sort_keys=True) for row in pq.read_table(path).to_pylist())
    else:
        text = path.read_text(encoding="utf-8")
    return text.replace(json.dumps(teachback_version()), '"<teachback version>"')


@pytest.mark.parametrize("fmt", sorted(FORMATS))
@pytest.mark.parametrize(
    "options",
    [{}, {"redact": False, "test_fraction": 0.5}],
    ids=["redacted", "plain-split"],
)
def test_export_output_is_unchanged(database: Path, tmp_path: Path, fmt: str, options: dict, snapshot) -> None:
    suffix = ".parquet" if FORMATS[fmt].parquet else ".jsonl"
    result = export([database], fmt, tmp_path / f"out{suffix}", tokenizer="estimate", **options)
    outputs = {path.name: exported(path) for path in sorted(result.paths)}
    assert outputs and all(outputs.values())
    assert outputs == snapshot
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == snapshot


def without_correction_call_ids(path: Path, into: Path) -> Path:
    """A copy of the database as the schema before m008 left it: no stored fixing-call ids."""
    into.write_bytes(path.read_bytes())
    conn = sqlite3.connect(into)
    conn.execute("ALTER TABLE pairs DROP COLUMN correction_call_id")
    conn.execute("DELETE FROM migrations WHERE name = 'm008_pair_correction_call'")
    conn.commit()
    conn.close()
    return into


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_migrated_database_exports_the_same_bytes(database: Path, tmp_path: Path, fmt: str) -> None:
    older = without_correction_call_ids(database, tmp_path / "older.db")
    suffix = ".parquet" if FORMATS[fmt].parquet else ".jsonl"
    recorded = export([database], fmt, tmp_path / f"recorded{suffix}", tokenizer="estimate")
    migrated = export([older], fmt, tmp_path / f"migrated{suffix}", tokenizer="estimate")
    assert call_ids(older) == call_ids(database)  # each id the recorder stored, back from the fixing event
    assert len([i for i in call_ids(database).values() if i]) == 9
    assert [exported(p) for p in migrated.paths] == [exported(p) for p in recorded.paths]


def call_ids(path: Path) -> dict[str, str | None]:
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT id, correction_call_id FROM pairs"))
    finally:
        conn.close()
