"""Instructions files that cannot be shown (a named pipe, a folder, a link out of the workspace,
binary, not UTF-8, unreadable, huge): the session goes on, the file is named in a notice, and
nothing of what it holds reaches the model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent.config import Settings
from agent.instructions import FILE_BYTES
from agent.protocol import ErrorEvent, UserInput
from agent.runtime import open_session
from cli.entry import main
from tests.conftest import call, turn

pytestmark = pytest.mark.timeout(60)  # a named pipe that blocked a read would hang here
SECRET = "Outside rule that must never be shown"


def fifo(path: Path, outside: Path) -> None:
    os.mkfifo(path)


def folder(path: Path, outside: Path) -> None:
    path.mkdir()
    (path / "inner.md").write_text(SECRET)


def link_out(path: Path, outside: Path) -> None:
    (outside / "rules.md").write_text(SECRET)
    path.symlink_to(outside / "rules.md")


def dangling(path: Path, outside: Path) -> None:
    path.symlink_to(path.parent / "missing.md")


def binary(path: Path, outside: Path) -> None:
    path.write_bytes(SECRET.encode() + b"\x00\x01\x02")


def latin1(path: Path, outside: Path) -> None:
    path.write_bytes(SECRET.encode() + " caf\xe9 ".encode("latin-1") + b"x" * 10)


def unreadable(path: Path, outside: Path) -> None:
    path.write_text(SECRET)
    path.chmod(0)


HOSTILE = {
    "fifo": (fifo, "is not a regular file"),
    "folder": (folder, "is a folder"),
    "link out of the workspace": (link_out, "is a link that leads out of the workspace"),
    "dangling link": (dangling, "could not be looked at"),
    "binary": (binary, "is a binary file"),
    "not UTF-8": (latin1, "is not UTF-8"),
    "unreadable": (unreadable, "could not be read"),
}


async def run(root: Path, model: str, **more):
    settings = Settings(model=model, approval="full-auto", repo_map_tokens=0, record=False, **more)
    session = open_session(root, settings)
    events: list = []
    session.subscribe(events.append)
    finished = await session.run(UserInput(text="look at pkg"))
    await session.close()
    return session, events, finished


def reading_pkg(script) -> str:
    return script(turn(call("read_file", {"path": "pkg/mod.py"})), turn(call("finish", {"summary": "read"})))


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("where", ["root", "pkg"])
async def test_a_file_that_cannot_be_read_is_named_in_a_notice(git_repo, script, tmp_path, kind, where) -> None:
    make, problem = HOSTILE[kind]
    if kind == "unreadable" and os.geteuid() == 0:
        pytest.skip("root reads a file whatever its permissions")
    (git_repo / "pkg").mkdir()
    (git_repo / "pkg" / "mod.py").write_text("VALUE = 1\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    name = "AGENTS.md" if where == "root" else "pkg/AGENTS.md"
    make(git_repo / name, outside)
    session, events, finished = await run(git_repo, reading_pkg(script))
    assert finished.reason == "finished"
    notices = [e.message for e in events if isinstance(e, ErrorEvent) and e.kind == "instructions"]
    assert len(notices) == 1 and notices[0].startswith(f"{name} {problem}"), notices
    assert all(SECRET not in (m.get("content") or "") for m in session.messages)
    assert "<instructions" not in "".join(m.get("content") or "" for m in session.messages)


async def test_a_huge_file_is_cut_at_the_cap_and_the_session_total_is_bounded(git_repo, script) -> None:
    (git_repo / "AGENTS.md").write_text("Root rule.\n" + "r" * (5 * 1024 * 1024))
    (git_repo / "pkg").mkdir()
    (git_repo / "pkg" / "mod.py").write_text("VALUE = 1\n")
    (git_repo / "pkg" / "AGENTS.md").write_text("Pkg rule.\n" + "p" * 40_000)
    session, events, finished = await run(git_repo, reading_pkg(script), instructions_bytes=FILE_BYTES + 1000)
    assert finished.reason == "finished"
    system = session.messages[0]["content"]
    assert "Root rule." in system and system.count("r" * 100) <= FILE_BYTES // 100
    assert f"the file is {5 * 1024 * 1024 + 11:,} bytes and only {FILE_BYTES:,} are shown" in system
    pkg_result = session.messages[3]["content"]
    assert "Pkg rule." in pkg_result and "only 1,000 are shown" in pkg_result  # what the total had left
    shown = sum(len(m.get("content") or "") for m in session.messages)
    assert shown < FILE_BYTES + 1000 + 4000  # the prompt and the results besides the instructions
    notices = [e.message for e in events if isinstance(e, ErrorEvent) and e.kind == "instructions"]
    assert [n.split(" ", 1)[0] for n in notices] == ["AGENTS.md", "pkg/AGENTS.md"]


async def test_once_the_total_is_spent_later_files_are_left_out_with_a_notice(git_repo, script) -> None:
    (git_repo / "AGENTS.md").write_text("x" * 100)
    (git_repo / "pkg").mkdir()
    (git_repo / "pkg" / "mod.py").write_text("VALUE = 1\n")
    (git_repo / "pkg" / "AGENTS.md").write_text("Pkg rule.\n")
    session, events, _ = await run(git_repo, reading_pkg(script), instructions_bytes=100)
    assert "Pkg rule." not in "".join(m.get("content") or "" for m in session.messages)
    notices = [e.message for e in events if isinstance(e, ErrorEvent) and e.kind == "instructions"]
    assert notices == [
        "pkg/AGENTS.md is left out: the instructions already shown fill instructions_bytes. "
        "Raise that setting, or shorten the files."
    ]


def test_doctor_lists_the_files_and_fails_on_one_it_would_leave_out(git_repo, script, capsys) -> None:
    (git_repo / "AGENTS.md").write_text("Root rule.\n")
    (git_repo / "pkg").mkdir()
    (git_repo / "pkg" / "CLAUDE.md").write_text("Pkg rule.\n")
    (git_repo / "docs").mkdir()
    os.mkfifo(git_repo / "docs" / "AGENTS.md")
    model = script(turn(call("finish", {"summary": "x"})))
    code = main(["doctor", "--workspace", str(git_repo), "--model", model])
    line = next(x for x in capsys.readouterr().out.splitlines() if " instructions: " in x)
    assert code == 1 and line.startswith("FAIL instructions: left out of what the model sees: docs/AGENTS.md is not")
    assert (
        "AGENTS.md (11 bytes) at the start" in line and "pkg/CLAUDE.md (10 bytes) when a turn works under pkg/" in line
    )
    (git_repo / "docs" / "AGENTS.md").unlink()
    assert main(["doctor", "--workspace", str(git_repo), "--model", model]) == 0
    assert "ok  instructions: AGENTS.md (11 bytes) at the start" in capsys.readouterr().out
