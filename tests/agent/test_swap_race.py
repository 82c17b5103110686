"""A folder swapped for a link to outside, and back, again and again while the agent's calls run in
it: every call is answered as a success or a tool error (never an internal error), nothing prints a
traceback, and nothing outside changes."""

from __future__ import annotations

import ctypes
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.protocol import ErrorEvent, ToolCallFinished
from tests.conftest import call, turn

RENAME_EXCHANGE = 2  # renameat2's flag: two names swap what they point at, in one step
AT_FDCWD = -100
CALLS_PER_STEP = 10
STEPS = 20  # 200 calls, as many as the race was first seen in


def exchanger():
    """Linux's atomic exchange of two names (a folder and a link), or None where there is none."""
    libc = ctypes.CDLL(None, use_errno=True)
    rename = getattr(libc, "renameat2", None)
    if rename is None:
        return None

    def exchange(a: Path, b: Path) -> None:
        if rename(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) != 0:
            number = ctypes.get_errno()
            raise OSError(number, os.strerror(number), str(a))

    return exchange


SWAPPER = f"""
import ctypes, os, sys
rename = ctypes.CDLL(None, use_errno=True).renameat2
swap, link = (os.fsencode(a) for a in sys.argv[1:3])
for _ in range(50_000_000):  # bounded: ended by the test long before
    if rename({AT_FDCWD}, swap, {AT_FDCWD}, link, {RENAME_EXCHANGE}) != 0:
        sys.exit(f"exchange failed: {{os.strerror(ctypes.get_errno())}}")
"""


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"" for p in sorted(folder.rglob("*"))}


def calls_of(step: int) -> list[dict]:
    """Reads, listings, searches, edits, creates, moves and deletes, all through the swapped folder;
    no two alike, so no loop guard answers in the tools' place."""
    n = step * CALLS_PER_STEP
    return [
        call("read_file", {"path": "swap/a.py", "start_line": 1, "end_line": step + 1}),
        call("list_files", {"path": "swap", "glob": f"*{step}*"}),
        call("search", {"pattern": f"value|step{step}", "path": "swap"}),
        call("create_file", {"path": f"swap/new{n}.py", "content": f"x = {n}\n"}),
        call("edit_file", {"path": "swap/a.py", "old_text": f"value = {step}\n", "new_text": f"value = {step + 1}\n"}),
        call("read_file", {"path": f"swap/sub/c{n - CALLS_PER_STEP}.py"}),
        call("create_file", {"path": f"swap/sub/c{n}.py", "content": "y = 1\n"}),
        call("move_file", {"src": f"swap/new{n}.py", "dst": f"swap/moved{n}.py"}),
        call("delete_file", {"path": f"swap/moved{n}.py"}),
        call("list_files", {"path": "swap/sub", "glob": f"*{n}*"}),
    ]


async def test_calls_racing_a_folder_swapped_for_a_link_are_tool_errors_or_successes(
    git_repo: Path, tmp_path: Path, script, run_agent, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture
) -> None:
    exchange = exchanger()
    if exchange is None:
        pytest.skip("this system has no renameat2 (RENAME_EXCHANGE) to swap a folder and a link atomically")
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "a.py").write_text("value = 'outside'\n")
    (outside / "sub" / "b0.py").write_text("outside = True\n")
    before = snapshot(outside)
    swap = git_repo / "swap"
    (swap / "sub").mkdir(parents=True)
    (swap / "a.py").write_text("value = 0\n")
    link = git_repo / "swap.link"
    link.symlink_to(outside)
    model = script(*[turn(*calls_of(step)) for step in range(STEPS)], turn(content="done"))
    caplog.set_level(logging.WARNING)
    # Another process swaps, as an attacker's would: it does not wait for this one's turn to run.
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, str(swap), str(link)])
    try:
        run = await run_agent(git_repo, model, max_steps=STEPS + 5)
        still_swapping = swapper.poll() is None
    finally:
        swapper.terminate()
        swapper.wait(timeout=30)
    if swap.is_symlink():  # stopped between the two exchanges
        exchange(swap, link)

    finished = run.of(ToolCallFinished)
    assert len(finished) == STEPS * CALLS_PER_STEP
    assert still_swapping  # the race ran through every call
    internal = [e.message for e in run.of(ErrorEvent) if e.kind == "internal"]
    assert internal == []
    crashed = [f.result for f in finished if "failed inside teachback" in f.result]
    assert crashed == []
    assert all(f.ok or f.error_kind for f in finished)
    assert any(f.ok for f in finished)
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
    assert "Traceback" not in capfd.readouterr().err
    assert snapshot(outside) == before  # nothing written, moved or deleted outside
    assert not link.is_dir() or link.is_symlink()


def test_a_read_through_a_folder_swapped_for_a_link_after_its_check_reads_nothing_outside(tmp_path: Path) -> None:
    """The moment the race aims at, made to happen: the path was checked, then a folder on its way became a
    link to outside. Opening it re-checks the open file itself."""
    from agent.workspace import Workspace, WorkspaceError

    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "pkg").mkdir(parents=True)
    outside.mkdir()
    (root / "pkg" / "a.py").write_text("inside\n")
    (outside / "a.py").write_text("SECRET outside\n")
    space = Workspace(root)
    checked = space.resolve("pkg/a.py")  # the check passes while pkg is a folder
    (root / "pkg" / "a.py").unlink()
    (root / "pkg").rmdir()
    (root / "pkg").symlink_to(outside, target_is_directory=True)  # swapped after the check
    try:
        with space.open_inside(checked) as handle:
            leaked = handle.read()
    except WorkspaceError as exc:
        assert exc.kind == "outside_workspace" and "SECRET" not in str(exc)
    else:
        raise AssertionError(f"read {leaked!r} through a link to outside")
    (root / "pkg").unlink()
    (root / "pkg").mkdir()
    (root / "pkg" / "a.py").write_text("inside again\n")
    assert space.read_text("pkg/a.py") == "inside again\n"
