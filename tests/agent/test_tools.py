"""Each tool's behaviour and the messages it sends the model."""

from __future__ import annotations

import asyncio

import pytest

from agent.config import Settings
from agent.toolkit import Toolbox
from agent.tools import ALL_TOOLS, ToolContext, default_toolbox
from agent.tools.commands import run_command
from agent.tools.edits import create_file, edit_file, move_file
from agent.tools.files import list_files, read_file, search
from agent.workspace import Workspace


@pytest.fixture
def ctx(git_repo):
    return ToolContext(workspace=Workspace(git_repo), settings=Settings(command_timeout=5))


def test_tool_names_and_arguments_are_the_public_interface():
    schemas = {s["function"]["name"]: s["function"]["parameters"] for s in default_toolbox().schemas()}
    expected = {
        "read_file": ["path", "start_line", "end_line"],
        "list_files": ["path", "glob"],
        "search": ["pattern", "path", "glob"],
        "edit_file": ["path", "old_text", "new_text", "replace_all"],
        "create_file": ["path", "content"],
        "delete_file": ["path"],
        "move_file": ["src", "dst"],
        "run_command": ["command", "timeout"],
        "session_diff": [],
        "finish": ["summary"],
        "repo_map": ["focus"],
    }
    assert {name: list(p["properties"]) for name, p in schemas.items()} == expected
    assert schemas["edit_file"]["required"] == ["path", "old_text", "new_text"]
    assert schemas["read_file"]["properties"]["start_line"]["type"] == "integer"
    assert all(p["properties"][k]["description"] for p in schemas.values() for k in p["properties"])


def test_read_file_pages_long_files(git_repo, ctx):
    (git_repo / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 1001)))
    first = read_file.fn(ctx, "long.txt")
    assert "(lines 1-400 of 1000)" in first.output and "start_line=401" in first.output
    middle = read_file.fn(ctx, "long.txt", 500, 502)
    assert middle.output.splitlines()[1:4] == ["500| line 500", "501| line 501", "502| line 502"]
    assert "498 more lines; read on with start_line=503" in middle.output
    assert read_file.fn(ctx, "long.txt", 2000).error_kind == "failed"
    assert read_file.fn(ctx, "long.txt", 5, 2).error_kind == "bad_arguments"


def test_read_file_refuses_binary_non_utf8_and_huge(git_repo, ctx):
    (git_repo / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (git_repo / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    (git_repo / "huge.txt").write_text("x" * 100 + "\n" * 30_000 + "y" * 3_000_000)
    assert read_file.fn(ctx, "img.png").error_kind == "binary"
    latin = read_file.fn(ctx, "latin1.txt")
    assert latin.error_kind == "encoding" and "not UTF-8" in latin.output
    assert edit_file.fn(ctx, "latin1.txt", "caf", "x").error_kind == "encoding"
    assert edit_file.fn(ctx, "huge.txt", "x", "y").error_kind == "too_large"
    paged = read_file.fn(ctx, "huge.txt", 1, 2)  # huge files can still be paged through
    assert paged.ok and "1| " + "x" * 100 in paged.output
    assert read_file.fn(ctx, "missing.py").error_kind == "not_found"


def test_list_files_honours_gitignore(git_repo, ctx):
    (git_repo / "debug.log").write_text("noise")
    (git_repo / "src").mkdir()
    (git_repo / "src" / "mod.py").write_text("x = 1\n")
    listed = list_files.fn(ctx).output.splitlines()
    assert "debug.log" not in listed and "src/mod.py" in listed and "app.py" in listed
    assert list_files.fn(ctx, "src").output == "src/mod.py"
    assert list_files.fn(ctx, glob="*.py").output.splitlines() == ["app.py", "src/mod.py", "util.py"]


def test_list_files_words_a_missing_path_as_read_file_does_and_a_file_as_a_file(git_repo, ctx):
    missing = list_files.fn(ctx, "src/nope")
    read = read_file.fn(ctx, "src/nope")
    assert missing.error_kind == read.error_kind == "not_found"
    assert missing.output == read.output == "src/nope does not exist. Use list_files or search to find the right path."
    a_file = list_files.fn(ctx, "./app.py")
    assert a_file.error_kind == "failed"
    assert a_file.output == "app.py is a file, not a directory; use read_file to read it."


def test_list_files_outside_git_uses_gitignore_too(tmp_path):
    (tmp_path / ".gitignore").write_text("build/\n*.tmp\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "out.js").write_text("")
    (tmp_path / "a.tmp").write_text("")
    (tmp_path / "keep.py").write_text("")
    ctx = ToolContext(workspace=Workspace(tmp_path), settings=Settings())
    assert list_files.fn(ctx).output.splitlines() == [".gitignore", "keep.py"]


def test_search_regex_globs_caps_and_bad_patterns(git_repo, ctx):
    assert search.fn(ctx, r"def \w+\(a, b\)").output.splitlines() == [
        "util.py:1: def add(a, b):",
        "util.py:5: def sub(a, b):",
    ]
    assert search.fn(ctx, "def", glob="app*").output == "app.py:1: def greet(name):"
    bad = search.fn(ctx, "def (")
    assert bad.error_kind == "bad_arguments" and "Escape special characters" in bad.output
    (git_repo / "many.txt").write_text("hit\n" * 250)
    capped = search.fn(ctx, "hit")
    assert len(capped.output.splitlines()) == 101 and "150 more matches" in capped.output


def test_edit_replace_all_create_exists_and_move(git_repo, ctx):
    result = edit_file.fn(ctx, "util.py", "(a, b)", "(x, y)", True)
    assert result.ok and result.changes[0].after.count("(x, y)") == 2
    assert create_file.fn(ctx, "app.py", "x").error_kind == "exists"
    moved = move_file.fn(ctx, "app.py", "src/app.py")
    assert moved.ok and moved.changes[0].new_path == "src/app.py"
    assert move_file.fn(ctx, "app.py", "util.py").error_kind == "exists"


async def test_run_command_exit_codes_timeout_and_capped_output(ctx):
    ok = await run_command.fn(ctx, "echo hello")
    assert ok.ok and "[exit code 0]" in ok.output and "hello" in ok.output
    failed = await run_command.fn(ctx, "echo oops >&2; exit 3")
    assert failed.error_kind == "exit_status" and "[exit code 3]" in failed.output and "oops" in failed.output
    slow = await run_command.fn(ctx, "sleep 30", timeout=1)
    assert slow.error_kind == "timeout" and "killed after 1 s" in slow.output
    noisy = await run_command.fn(ctx, "python3 -c \"print('a' * 50000)\"")
    assert "characters cut" in noisy.output and len(noisy.output) < 13_000


async def test_run_command_does_not_block_the_event_loop(ctx):
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    task = asyncio.create_task(ticker())
    await run_command.fn(ctx, "sleep 0.5")
    task.cancel()
    assert ticks >= 5


def test_toolbox_lists_tools_in_errors():
    box = Toolbox(ALL_TOOLS)
    result = box.prepare("grep", "{}")
    assert result.error_kind == "unknown_tool"
    assert all(f"- {name}(" in result.output for name in box.names)
    assert box.prepare("finish", "[1]").error_kind == "malformed_json"
    missing = box.prepare("edit_file", '{"path": "a"}')
    assert "missing required argument 'old_text'" in missing.output
    extra = box.prepare("finish", '{"summary": "x", "force": true}')
    assert "unknown argument 'force'" in extra.output
