"""The floor package's helpers on real files and real locks."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from common.diffs import unified_diff
from common.environment import environment
from common.sqlite import is_busy, use_wal
from common.text import clip, first_line, one_line


def _locked(path: Path) -> sqlite3.Connection:
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    return holder


def test_the_wal_switch_waits_for_a_lock_and_gives_up_at_its_timeout(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    holder = _locked(path)
    waiter = sqlite3.connect(path, timeout=0, isolation_level=None)
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError) as raised:
        use_wal(waiter, 0.2)
    assert is_busy(raised.value) and time.monotonic() - started >= 0.2
    threading.Timer(0.1, holder.rollback).start()
    use_wal(waiter, 5.0)
    assert waiter.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_other_sqlite_errors_are_not_retried(tmp_path: Path) -> None:
    (tmp_path / "junk.db").write_bytes(b"not a database" * 100)
    conn = sqlite3.connect(tmp_path / "junk.db", isolation_level=None)
    started = time.monotonic()
    with pytest.raises(sqlite3.DatabaseError) as raised:
        use_wal(conn, 5.0)
    assert not is_busy(raised.value) and time.monotonic() - started < 1.0


def test_diffs_end_lines_at_newlines_only_and_mark_a_missing_last_one() -> None:
    before, after = "a\fb\nc\n", "a\fb\nd"
    diff = unified_diff("x.py", before, after)
    assert diff.splitlines(keepends=True)[:3] == ["--- a/x.py\n", "+++ b/x.py\n", "@@ -1,2 +1,2 @@\n"]
    assert " a\fb\n" in diff and diff.endswith("+d\n\\ No newline at end of file\n")
    assert unified_diff("x.py", None, "new\n").startswith("--- /dev/null\n+++ b/x.py\n")
    assert unified_diff("old.py", "gone\n", None, new_rel="ignored").startswith("--- a/old.py\n+++ /dev/null\n")
    assert "+++ b/new.py" in unified_diff("old.py", "a\n", "b\n", new_rel="new.py")
    assert unified_diff("same.py", "a\n", "a\n") == ""


def test_text_is_cut_to_its_limit_with_a_mark() -> None:
    assert clip("abcdef", 6) == "abcdef" and clip("abcdefg", 6) == "abcde…"
    assert clip("abcdefg", 6, "...") == "abc..." and len(clip("x" * 10**6, 80, "...")) == 80
    assert one_line(" a\n\tb   c ", 20) == "a b c" and one_line(None, 5) == "" and one_line("ab cd ef", 5) == "ab c…"
    assert first_line("\n\n  first line  \nsecond", 8) == "first l…" and first_line("  \n ", 8) == ""


def test_environment_is_put_back_as_it_was() -> None:
    os.environ["TEACHBACK_FLOOR_SET"] = "before"
    os.environ.pop("TEACHBACK_FLOOR_UNSET", None)
    with pytest.raises(RuntimeError), environment({"TEACHBACK_FLOOR_SET": "in", "TEACHBACK_FLOOR_UNSET": "in"}):
        assert os.environ["TEACHBACK_FLOOR_SET"] == os.environ["TEACHBACK_FLOOR_UNSET"] == "in"
        raise RuntimeError("the block failed")
    assert os.environ.pop("TEACHBACK_FLOOR_SET") == "before" and "TEACHBACK_FLOOR_UNSET" not in os.environ
