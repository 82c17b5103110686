"""Migrations from a blank database, and the errors people see for unusable files."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from feedback_store import StoreError, open_store
from feedback_store.migrations import MIGRATIONS

EXPECTED_COLUMNS = {
    "migrations": ["name", "applied_at"],
    "blobs": ["hash", "kind", "size", "content"],
    "sessions": [
        "id",
        "workspace",
        "model",
        "frontend",
        "git_head",
        "config",
        "system_prompt_hash",
        "tools_hash",
        "protocol_version",
        "started_at",
        "title",
        "repository",
        "agent",
        "agent_version",
        "author",
    ],
    "events": ["id", "session_id", "type", "ts", "cause_id", "json"],
    "messages": ["session_id", "seq", "event_id", "role", "message"],
    "turns": [
        "id",
        "session_id",
        "turn",
        "text",
        "started_at",
        "finished_at",
        "reason",
        "summary",
        "steps",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
    ],
    "model_calls": [
        "id",
        "session_id",
        "step",
        "model",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
        "latency_ms",
        "attempts",
        "logprobs",
        "ts",
        "tool_mode",
        "rendered",
        "prompt_token_ids",
        "completion_token_ids",
    ],
    "tool_calls": [
        "id",
        "session_id",
        "call_id",
        "name",
        "arguments",
        "step",
        "message_seq",
        "status",
        "error_kind",
        "target",
        "result",
        "duration_ms",
        "started_at",
        "finished_at",
        "roles",
        "exit_code",
        "finished_id",
        "blocked_by_hook",
    ],
    "edits": [
        "id",
        "session_id",
        "call_id",
        "event_id",
        "message_seq",
        "path",
        "new_path",
        "kind",
        "before_hash",
        "after_hash",
        "diff",
        "syntax_error",
        "decision",
        "comment",
        "user_hash",
        "reviewed_at",
        "ts",
    ],
    "approvals": [
        "id",
        "session_id",
        "call_id",
        "action",
        "summary",
        "detail",
        "approved",
        "comment",
        "requested_at",
        "resolved_at",
    ],
    "pairs": [
        "id",
        "session_id",
        "source",
        "tool",
        "error_kind",
        "target",
        "feedback",
        "tools_hash",
        "anchor_seq",
        "completion_seq",
        "correction_seq",
        "correction",
        "closes_on",
        "failure_event_id",
        "correction_event_id",
        "created_at",
        "corrected_at",
        "correction_call_id",
    ],
    "flags": ["id", "session_id", "rule", "detail", "event_id", "created_at"],
    "lesson_pairs": ["id", "pair_id", "session_id", "lesson_id", "pending"],
    "pair_search": ["tool", "error_kind", "target", "call", "feedback"],
    "pair_search_data": ["id", "block"],
    "pair_search_idx": ["segid", "term", "pgno"],
    "pair_search_content": ["id", "c0", "c1", "c2", "c3", "c4"],
    "pair_search_docsize": ["id", "sz"],
    "pair_search_config": ["k", "v"],
    "lessons": [
        "id",
        "key",
        "origin",
        "tool",
        "error_kind",
        "target",
        "text",
        "feedback",
        "correction",
        "edited",
        "pinned",
        "deleted",
        "occurrences",
        "corrected",
        "source_pair",
        "source_session",
        "workspace",
        "author",
        "created_at",
        "updated_at",
        "last_seen",
    ],
    "learning_rounds": [
        "id",
        "action",
        "adapter_id",
        "adapter_dir",
        "parent",
        "base",
        "data_hash",
        "records",
        "since",
        "metrics",
        "promoted",
        "reason",
        "started_at",
        "finished_at",
    ],
    "recording_notes": ["id", "session_id", "event_id", "stage", "problem", "ts"],
    "share_settings": ["scope", "key", "shared", "reason", "set_at"],
    "imports": ["path", "agent", "session_id", "size", "mtime", "lines", "skipped", "imported_at"],
    "hook_inbox": ["id", "agent", "session", "source", "ts", "payload", "key", "processed"],
    "store_meta": ["key", "value"],
}


def columns(path: Path) -> dict[str, list[str]]:
    conn = sqlite3.connect(path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    found = {t: [r[1] for r in conn.execute(f"PRAGMA table_info({t})")] for t in tables}
    conn.close()
    return found


def test_blank_database_gets_exact_schema(tmp_path: Path) -> None:
    path = tmp_path / "new" / "feedback.db"
    store = open_store(path)
    store.close()
    assert columns(path) == EXPECTED_COLUMNS
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT name FROM migrations")] == [name for name, _ in MIGRATIONS]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_reopening_applies_nothing_twice(tmp_path: Path) -> None:
    path = tmp_path / "feedback.db"
    open_store(path).close()
    open_store(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*) FROM migrations").fetchone()[0] == len(MIGRATIONS)


def test_corrupt_file_says_how_to_fix(tmp_path: Path) -> None:
    path = tmp_path / "feedback.db"
    path.write_bytes(b"this is not an sqlite database, just some bytes " * 100)
    with pytest.raises(StoreError) as caught:
        open_store(path)
    assert "damaged" in str(caught.value) and "Move it aside" in str(caught.value)


def test_locked_file_says_how_to_fix(tmp_path: Path) -> None:
    path = tmp_path / "feedback.db"
    open_store(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        store = open_store(path, timeout=0.2)  # the schema is current: opening needs no write
        with pytest.raises(StoreError) as caught:
            with store.write() as conn:
                conn.execute("INSERT INTO flags (id) VALUES ('x')")
        assert "locked" in str(caught.value) and "Close that program" in str(caught.value)
        store.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_locked_blank_file_fails_at_open(tmp_path: Path) -> None:
    path = tmp_path / "feedback.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError, match="locked"):
            open_store(path, timeout=0.2)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_folder_says_how_to_fix(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(StoreError, match="--db"):
            open_store(folder / "sub" / "feedback.db")
    finally:
        folder.chmod(0o700)


def test_unusable_path_says_how_to_fix(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where a folder should be")
    with pytest.raises(StoreError, match="--db"):
        open_store(blocker / "feedback.db")


def test_another_programs_database_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="another program"):
        open_store(path)
    assert columns(path) == {"notes": ["body"]}
