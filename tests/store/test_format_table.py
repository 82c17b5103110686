"""One record per export format: what its records carry, what the command line offers, what the
dataset card says and which file it writes all come from that record."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from cli.export import add_export_arguments
from feedback_store import Recorder, open_store
from feedback_store.export.atif import export_atif
from feedback_store.export.export import export
from feedback_store.export.format_table import FORMATS, TRAJECTORIES, format_of
from tests.store.events import mixed_session

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "feedback.db"
    with open_store(path) as store:
        Recorder(store).record_many([*mixed_session(task="one").events, *mixed_session(task="two").events])
    return path


def read(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("kind", sorted(FORMATS))
def test_a_format_record_says_what_its_export_writes(kind: str, db: Path, tmp_path: Path) -> None:
    form = FORMATS[kind]
    result = export([db], kind, tmp_path / f"out{form.suffix}", test_fraction=0)
    records = read(result.paths[0])
    assert result.paths[0].suffix == form.suffix
    assert {record["format"] for record in records} == {form.name}
    assert set().union(*records) == {*form.columns, "provenance"}
    assert f"- Trainer: {form.trainer}\n" in result.card.read_text(encoding="utf-8")


def test_the_trajectory_record_says_what_its_export_writes(db: Path, tmp_path: Path) -> None:
    count, _, path, card = export_atif([db], tmp_path / "sessions.jsonl")
    records = read(path)
    assert count == len(records) == 2
    assert all(tuple(record) == TRAJECTORIES.columns for record in records)
    assert {record["extra"]["format"] for record in records} == {TRAJECTORIES.name}
    assert f"- Trainer: {TRAJECTORIES.trainer}\n" in card.read_text(encoding="utf-8")


def test_the_command_line_offers_every_format_from_the_table() -> None:
    parser = argparse.ArgumentParser()
    add_export_arguments(parser)
    helps = {action.dest: action.help for action in parser._actions}
    for kind in [*FORMATS, TRAJECTORIES.kind]:
        assert kind in helps["format"]
        assert format_of(kind).kind == kind
    parquet = [kind for kind, form in FORMATS.items() if form.parquet]
    assert parquet and f".parquet for {', '.join(parquet)}" in helps["out"]


def test_only_the_formats_that_train_on_the_fix_need_one_and_only_kto_adds_accepted_edits() -> None:
    assert {kind for kind, form in FORMATS.items() if form.needs_correction} == {"dpo", "sft", "trl-sdft"}
    assert {kind for kind, form in FORMATS.items() if form.accepted_edits} == {"kto"}
    with pytest.raises(ValueError, match="whole sessions"):
        TRAJECTORIES.build(None)
