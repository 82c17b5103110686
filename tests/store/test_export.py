"""Export: every format loads with `datasets`, several databases dedupe, the split is by session."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from feedback_store import Recorder, StoreError, open_store
from feedback_store.export.export import FORMATS, EmptyExport, export, split_of
from feedback_store.export.formats import Example, hindsight, sdpo
from tests.store.events import FakeSession, edit, mixed_session

pytestmark = pytest.mark.timeout(120)

FIELDS = {
    "sdpo": {
        "format",
        "id",
        "session_id",
        "source",
        "model",
        "created_at",
        "prompt",
        "tools",
        "completion",
        "feedback",
        "correction",
        "chosen",
        "teacher_prompt",
        "rendered",
    },
    "trl-sdpo": {"format", "id", "prompt", "privileged_context", "tools", "ground_truth"},
    "trl-sdft": {"format", "id", "prompt", "privileged_context", "tools"},
    "dpo": {"format", "id", "prompt", "chosen", "rejected", "tools"},
    "sft": {"format", "id", "prompt", "completion", "tools"},
    "kto": {"format", "id", "prompt", "completion", "label", "tools"},
    "verl": {"format", "data_source", "prompt", "ability", "reward_model", "extra_info"},
}
VERSIONS = {"sdpo": 3, "trl-sdpo": 2, "trl-sdft": 3, "dpo": 3, "sft": 3, "kto": 2, "verl": 2}
# 2 sessions x 4 automatic pairs + a hand correction + an unfixed read: every pair but the
# unfixed read has a correction that fits its prompt; kto adds a true record for each of those 9.
RECORDS = {"sdpo": 10, "trl-sdpo": 10, "verl": 10, "kto": 19, "trl-sdft": 9, "dpo": 9, "sft": 9}


def write_db(path: Path, *sessions: FakeSession) -> Path:
    store = open_store(path)
    Recorder(store).record_many([e for s in sessions for e in s.events])
    store.close()
    return path


@pytest.fixture
def db(tmp_path: Path) -> Path:
    unfixed = FakeSession().start().user("read the config")
    unfixed.call(
        "read_file",
        {"path": "conf.toml"},
        ok=False,
        error_kind="not_found",
        target="conf.toml",
        result="conf.toml does not exist.",
    )
    reviewed = FakeSession().start().user("tidy b.py")
    reviewed.call(
        "edit_file", {"path": "b.py"}, target="b.py", edits=[edit("b.py", "x = 1\n", "x = 2\n", edit_id="e9")]
    )
    reviewed.review("e9", "b.py", "corrected", user_content="X = 2\n")
    return write_db(
        tmp_path / "a.db", mixed_session(task="one"), mixed_session(task="two"), unfixed.finish(), reviewed.finish()
    )


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_loads_with_datasets(fmt: str, db: Path, tmp_path: Path) -> None:
    import datasets

    out = tmp_path / ("out.parquet" if fmt == "verl" else "out.jsonl")
    result = export([db], fmt, out)
    assert result.records == RECORDS[fmt]
    loaded = datasets.load_dataset("parquet" if fmt == "verl" else "json", data_files=str(out), split="train")
    assert len(loaded) == result.records
    assert FIELDS[fmt] <= set(loaded.column_names)
    assert set(loaded["format"]) == {f"teachback-{fmt}-{VERSIONS[fmt]}"}


def test_sdpo_teacher_prompt_holds_the_hindsight_and_the_prompt_does_not(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    export([db], "sdpo", out)
    for line in out.read_text().splitlines():
        record = json.loads(line)
        hint = record["teacher_prompt"][-1]
        assert record["teacher_prompt"][:-1] == record["prompt"]
        assert hint["role"] == "user" and record["feedback"] in hint["content"]
        assert not any(record["feedback"] in (m.get("content") or "") for m in record["prompt"])
        assert record["completion"]["role"] == "assistant"
        if record["correction"] is not None:
            assert "A reply that worked" in hint["content"]


def test_trl_columns_carry_the_hindsight(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    export([db], "trl-sdpo", out, source="schema")
    record = json.loads(out.read_text().splitlines()[0])
    assert "Available tools" in record["privileged_context"] and record["prompt"][0]["role"] == "system"
    export([db], "trl-sdft", out, source="schema")
    record = json.loads(out.read_text().splitlines()[0])
    assert record["privileged_context"].startswith('Example response:\n<tool_call>\n{"name": "read_file"')


def test_dpo_and_sft_use_the_correction(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    export([db], "dpo", out, source="tool")
    record = json.loads(out.read_text().splitlines()[0])
    assert record["rejected"][0]["tool_calls"][0]["id"] == "call_1"
    assert record["chosen"][0]["tool_calls"][0]["id"] == "call_2"
    export([db], "sft", out, source="tool")
    record = json.loads(out.read_text().splitlines()[0])
    # the fixing call found app.py as the failed one did: it is trained as the model sent it
    assert record["completion"][0]["tool_calls"][0]["function"]["arguments"]["old_text"] == "Hello"
    assert record["chosen_derived"] is False
    assert all(m.get("tool_calls", [{}])[0].get("id") != "call_1" for m in record["prompt"])


def test_exporters_are_pure_functions(db: Path) -> None:
    pair = open_store(db).pairs(source="lint")[0]
    assert sdpo(Example(pair)) == sdpo(Example(pair))
    assert pair.feedback in hindsight(pair)


def test_several_databases_dedupe_and_order_is_deterministic(db: Path, tmp_path: Path) -> None:
    copy = shutil.copy(db, tmp_path / "copy.db")
    other = write_db(tmp_path / "other.db", mixed_session(task="three"))
    single = export([db], "sdpo", tmp_path / "single.jsonl")
    both = export([db, copy, other], "sdpo", tmp_path / "both.jsonl")
    swapped = export([other, copy, db], "sdpo", tmp_path / "swapped.jsonl")
    assert both.duplicates == single.records and both.records == single.records + 4
    assert (tmp_path / "both.jsonl").read_text() == (tmp_path / "swapped.jsonl").read_text()
    assert swapped.records == both.records


def test_split_by_session_keeps_each_conversation_on_one_side(tmp_path: Path) -> None:
    # Fixed ids, three of which hash to the test side: random ones all landed in train 1.4% of the time.
    sessions = [mixed_session(session_id=f"session-{n:02d}", task=f"task {n}") for n in range(12)]
    db = write_db(tmp_path / "many.db", *sessions)
    result = export([db], "sdpo", tmp_path / "data.jsonl", test_fraction=0.3)
    train, test = (tmp_path / "data.train.jsonl"), (tmp_path / "data.test.jsonl")
    assert result.paths == [train, test]
    ids = {
        name: {json.loads(line)["session_id"] for line in path.read_text().splitlines()}
        for name, path in (("train", train), ("test", test))
    }
    assert ids["test"] == {"session-02", "session-04", "session-05"} and len(ids["train"]) == 9
    assert not ids["train"] & ids["test"]
    assert result.splits == {"train": 4 * len(ids["train"]), "test": 4 * len(ids["test"])}
    assert all(split_of(sid, 0.3) == "test" for sid in ids["test"])
    again = export([db], "sdpo", tmp_path / "data.jsonl", test_fraction=0.3)
    assert again.splits == result.splits


def test_filters_reach_the_export(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    assert export([db], "sdpo", out, source="user").records == 1
    with pytest.raises(EmptyExport, match="--model nobody/none"):
        export([db], "sdpo", tmp_path / "none.jsonl", model="nobody/none")
    with pytest.raises(EmptyExport, match="--since 2999-01-01"):
        export([db], "sdpo", tmp_path / "none.jsonl", since="2999-01-01")
    assert not (tmp_path / "none.jsonl").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".none.jsonl")]  # no temporary file left


def test_an_empty_selection_writes_no_file_and_says_what_to_change(db: Path, tmp_path: Path) -> None:
    with pytest.raises(EmptyExport) as caught:
        export([db], "dpo", tmp_path / "dpo.jsonl", source="monitor")
    text = str(caught.value)
    assert "0 matching pairs (10 pairs in the database; filters: --source monitor)" in text
    assert "Change the filters" in text and "No file was written" in text and not (tmp_path / "dpo.jsonl").exists()
    unfixed = FakeSession().start().user("read it")
    unfixed.call(
        "read_file",
        {"path": "gone.txt"},
        ok=False,
        error_kind="not_found",
        target="gone.txt",
        result="gone.txt does not exist.",
    )
    only_unfixed = write_db(tmp_path / "unfixed.db", unfixed.finish())
    with pytest.raises(EmptyExport) as caught:
        export([only_unfixed], "sft", tmp_path / "sft.jsonl")
    assert "1 no read_file call succeeded within 4 replies of it in its turn" in str(caught.value)
    assert "export sdpo, trl-sdpo or kto" in str(caught.value)
    assert not (tmp_path / "sft.jsonl").exists()
    out = tmp_path / "x.jsonl"
    code = subprocess.run(
        [sys.executable, "-m", "cli", "export", "--db", str(only_unfixed), "--format", "sft", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert code.returncode == 2 and "Nothing to export" in code.stderr and not out.exists()


def test_near_duplicates_are_exported_once(tmp_path: Path) -> None:
    s = FakeSession().start().user("read app.py")
    for call_id in range(3):  # the same call and feedback three times (only the call ids differ)
        s.call(
            "read_file",
            {"path": "app.py"},
            ok=False,
            error_kind="repeated_call",
            target="app.py",
            result=f"You already sent this exact call (call_{call_id}a). Do not repeat it.",
        )
    s.call("read_file", {"path": "util.py"}, target="util.py", result="x = 1")
    db = write_db(tmp_path / "dups.db", s.finish())
    assert len(open_store(db).pairs()) == 3
    result = export([db], "sdpo", tmp_path / "out.jsonl")
    assert result.records == 1 and result.near_duplicates == 2
    assert result.left_out["near-duplicates (same call and feedback in a session)"] == 2
    card = result.card.read_text()
    assert "near-duplicates (same call and feedback in a session): 2" in card


def test_progress_is_reported(db: Path, tmp_path: Path) -> None:
    seen = []
    export([db], "sdpo", tmp_path / "out.jsonl", progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (10, 10)


def test_user_errors(db: Path, tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="Choose one of: sdpo"):
        export([db], "alpaca", tmp_path / "x.jsonl")
    with pytest.raises(StoreError, match="No feedback database"):
        export([tmp_path / "missing.db"], "sdpo", tmp_path / "x.jsonl")
    with pytest.raises(StoreError, match="test-fraction"):
        export([db], "sdpo", tmp_path / "x.jsonl", test_fraction=1.5)
    with pytest.raises(StoreError, match="--since"):
        export([db], "sdpo", tmp_path / "x.jsonl", since="last tuesday")
    assert not (tmp_path / "x.jsonl").exists()


def test_verl_without_pyarrow_says_how_to_install(db: Path, tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['pyarrow'] = None\n"
        "from feedback_store.export.export import export\n"
        "from feedback_store import StoreError\n"
        f"try:\n    export([{str(db)!r}], 'verl', {str(tmp_path / 'x.parquet')!r})\n"
        "except StoreError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "pip install 'teachback[parquet]'" in out.stdout
