"""kto, verl and the reward function; redaction of whole records; the card; an empty split."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from feedback_store import Recorder, open_store
from feedback_store.export.export import export
from feedback_store.rewards import compute_score, score, tool_call_reward
from tests.store.events import FakeSession, edit, mixed_session

pytestmark = pytest.mark.timeout(120)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_db(path: Path, *sessions: FakeSession) -> Path:
    store = open_store(path)
    Recorder(store).record_many([e for s in sessions for e in s.events])
    store.close()
    return path


def reviewed_session() -> FakeSession:
    return with_reviews(FakeSession().start().user("tidy the files")).finish()


def with_reviews(s: FakeSession) -> FakeSession:
    """Two edits of the agent's, one the user accepted and one they rejected."""
    s.call(
        "edit_file",
        {"path": "a.py", "old_text": "x", "new_text": "y"},
        target="a.py",
        edits=[edit("a.py", "x = 1\n", "y = 1\n", edit_id="ok1")],
    )
    s.review("ok1", "a.py", "accepted")
    s.call(
        "edit_file",
        {"path": "b.py", "old_text": "x", "new_text": "z"},
        target="b.py",
        edits=[edit("b.py", "x = 1\n", "z = 1\n", edit_id="no1")],
    )
    s.review("no1", "b.py", "rejected", comment="keep x")
    return s


def test_kto_labels_failures_fixes_and_user_verdicts(tmp_path: Path) -> None:
    db = write_db(tmp_path / "f.db", reviewed_session(), mixed_session())
    result = export([db], "kto", tmp_path / "kto.jsonl", tokenizer="estimate")
    records = lines(tmp_path / "kto.jsonl")
    verdicts = {r["id"].rsplit("-", 1)[-1]: r["label"] for r in records if r["source"] == "user"}
    assert verdicts == {"accepted": True, "user": False}  # the accepted edit, the rejected one
    assert sum(r["label"] for r in records) == 1 + 4  # the accepted edit and the 4 fitting corrections
    assert result.records == len(records) == 2 + 4 * 2
    assert all(isinstance(r["label"], bool) and r["completion"][0]["role"] == "assistant" for r in records)


def test_verl_rows_carry_index_tools_kwargs_and_a_scorable_ground_truth(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    db = write_db(tmp_path / "f.db", mixed_session())
    export([db], "verl", tmp_path / "rl.parquet", tokenizer="estimate")
    rows = pq.read_table(tmp_path / "rl.parquet").to_pylist()
    assert [r["extra_info"]["index"] for r in rows] == list(range(len(rows)))
    names = {"read_file", "edit_file", "create_file", "delete_file", "run_command", "finish"}
    for row in rows:
        assert row["data_source"].startswith("teachback/") and row["reward_model"]["ground_truth"]
        assert set(row["extra_info"]["tools_kwargs"]) == names
        assert row["extra_info"]["tools_kwargs"]["read_file"]["create_kwargs"]["pair_id"] == row["extra_info"]["id"]
        truth = json.loads(row["reward_model"]["ground_truth"])
        expected = json.dumps({"name": truth["expected"]["name"], "arguments": truth["expected"]["arguments"]})
        assert (
            compute_score(row["data_source"], expected, row["reward_model"]["ground_truth"], row["extra_info"]) == 1.0
        )
        failed = json.dumps({"name": truth["failed"]["name"], "arguments": truth["failed"]["arguments"]})
        assert compute_score(row["data_source"], failed, row["reward_model"]["ground_truth"]) == 0.0
    with pytest.raises(NotImplementedError):
        compute_score("openai/gsm8k", "42", "42")


TOOLS = {
    "read_file": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": False,
    },
    "edit_file": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "old_text": {"type": "string"}, "new_text": {"type": "string"}},
        "required": ["path", "old_text", "new_text"],
    },
}
TRUTH = json.dumps(
    {
        "failed": {"name": "read_file", "arguments": {"path": "ap.py"}},
        "expected": {"name": "read_file", "arguments": {"path": "app.py"}},
        "feedback": "ap.py does not exist.",
        "error_kind": "not_found",
        "tools": TOOLS,
    }
)


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ('<tool_call>\n{"name": "read_file", "arguments": {"path": "app.py"}}\n</tool_call>', 1.0),
        ('{"name": "read_file", "arguments": {"path": "app.py", "start_line": 1}}', 0.25),  # not in its schema
        ('{"name": "edit_file", "arguments": {"path": "app.py", "old_text": "a", "new_text": "b"}}', 0.5),
        ('{"name": "edit_file", "arguments": {"path": "app.py"}}', 0.25),  # missing arguments
        ('{"name": "read_file", "arguments": {"path": "ap.py"}}', 0.0),  # the failed call again
        ('{"name": "open_file", "arguments": {"path": "app.py"}}', 0.0),  # no such tool
        ("I would read app.py first.", 0.0),
        (
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "read_file", "arguments": '{"path": "app.py"}'}}],
            },
            1.0,
        ),
    ],
)
def test_score(completion, expected: float) -> None:
    assert score(completion, TRUTH) == expected


def test_tool_call_reward_takes_trls_arguments() -> None:
    completions = [
        [{"role": "assistant", "content": '{"name": "read_file", "arguments": {"path": "app.py"}}'}],
        [{"role": "assistant", "content": "no call"}],
    ]
    rewards = tool_call_reward(
        prompts=[[], []],
        completions=completions,
        ground_truth=[TRUTH, TRUTH],
        completion_ids=[[1], [2]],
        trainer_state=None,
    )
    assert rewards == [1.0, 0.0]


def test_whole_records_are_redacted_and_token_data_dropped_with_it(tmp_path: Path, monkeypatch) -> None:
    secret = "sk-proj-" + "Ab3dE5gH7jK9mN1pQ3sT5vX7zB9dF1hJ3lN5pR7tV9xZ1bD3"
    s = FakeSession().start().user("rotate the key")
    s.call(  # an edit that breaks the file: its fix is derived from the file's net change
        "edit_file",
        {"path": "conf.py", "old_text": "KEY = '", "new_text": "KEY = None '"},
        target="conf.py",
        edits=[edit("conf.py", f"KEY = '{secret}'\n", f"KEY = None '{secret}'\n", syntax_error="conf.py:1: invalid")],
    )
    s.call(
        "edit_file",
        {"path": "conf.py", "old_text": "None '", "new_text": "None #'"},
        target="conf.py",
        edits=[edit("conf.py", f"KEY = None '{secret}'\n", f"KEY = None #'{secret}'\n")],
    )
    db = write_db(tmp_path / "f.db", s.finish())
    result = export([db], "dpo", tmp_path / "dpo.jsonl", tokenizer="estimate")
    text = (tmp_path / "dpo.jsonl").read_text()
    assert secret not in text and "[REDACTED:" in text  # the secret came from the file, into `chosen`
    assert result.redactions >= 2 and sum(result.redacted_kinds.values()) == result.redactions
    raw = export([db], "dpo", tmp_path / "raw.jsonl", redact=False, tokenizer="estimate")
    assert secret in (tmp_path / "raw.jsonl").read_text() and raw.redactions == 0


def test_an_empty_split_is_a_warning_and_no_file(tmp_path: Path) -> None:
    db = write_db(tmp_path / "f.db", mixed_session())
    result = export([db], "sdpo", tmp_path / "one.jsonl", test_fraction=0.01, tokenizer="estimate")
    empty = "test" if result.splits["test"] == 0 else "train"
    assert result.splits[empty] == 0 and len(result.paths) == 1
    assert not (tmp_path / f"one.{empty}.jsonl").exists()
    assert any(f"the {empty} split is empty" in w for w in result.warnings)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "export",
            "--db",
            str(db),
            "--format",
            "sdpo",
            "--out",
            str(tmp_path / "cli.jsonl"),
            "--test-fraction",
            "0.01",
            "--tokenizer",
            "estimate",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0 and f"warning: the {empty} split is empty" in out.stderr


def test_the_dataset_card_describes_each_export_in_its_folder(tmp_path: Path) -> None:
    db = write_db(tmp_path / "f.db", mixed_session(), reviewed_session())
    out = tmp_path / "data"
    export([db], "sft", out / "sft.jsonl", tokenizer="estimate", command="teachback export --format sft")
    dpo = export([db], "dpo", out / "dpo.jsonl", test_fraction=0.5, tokenizer="estimate")
    card = (out / "README.md").read_text()
    assert dpo.card == out / "README.md"
    assert "## sft.jsonl — `teachback-sft-3`" in card and "## dpo.jsonl — `teachback-dpo-3`" in card
    assert "trl.SFTTrainer" in card and "`teachback export --format sft`" in card
    assert "| lint | 1 |" in card and "| no_match | 1 |" in card
    assert "- no correction: 1" in card  # the rejected edit
    assert "Redaction: on; nothing found" in card and "split by session" in card
    assert "`rendered`:" in card and "estimated at 4 characters per token" in card
    export([db], "sft", out / "sft.jsonl", source="lint", tokenizer="estimate")  # replaces its own section only
    again = (out / "README.md").read_text()
    assert again.count("## sft.jsonl") == 1 and "## dpo.jsonl" in again and "| tool |" not in again.split("## dpo")[0]
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "README.md").write_text("my notes\n")
    other = export([db], "sft", tmp_path / "mine" / "x.jsonl", tokenizer="estimate")
    assert other.card == tmp_path / "mine" / "x.README.md"
    assert (tmp_path / "mine" / "README.md").read_text() == "my notes\n"
