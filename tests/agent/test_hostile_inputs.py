"""Inputs that used to end a turn or run without bound. Each must come back to the model as a tool
error that says what to send instead, and the turn must go on to the model's next call."""

from __future__ import annotations

import json
import os
import time

from agent.config import Settings
from agent.model import LiteLLMModel
from agent.protocol import ErrorEvent, ToolCallFinished, UserInput
from agent.session import Session
from agent.toolkit import Toolbox, ToolResult, tool
from agent.tools import ALL_TOOLS, ToolContext
from agent.tools.files import read_file, search
from agent.workspace import Workspace
from tests.conftest import call, turn

THEN = (turn(call("read_file", {"path": "app.py"})), turn(call("finish", {"summary": "done"})))


# Each hostile turn of the first hardening round (tests/store/test_hostile_session.py runs them all in one
# recorded session).
LONG_NAME = "n" * 300 + ".py"
OVERLONG_PATHS = turn(
    call("read_file", {"path": LONG_NAME}),
    call("create_file", {"path": f"pkg/{LONG_NAME}", "content": "x = 1\n"}),
    call("edit_file", {"path": "a/" * 2100 + "b.py", "old_text": "x", "new_text": "y"}),
    call("read_file", {"path": "p" * (1 << 20)}),
)

LONG_COMMAND = turn(call("run_command", {"command": "echo " + "x" * 200_000}))

DEEP_ARGUMENTS = turn(
    call("read_file", "[" * 100_000),
    call("read_file", "[" * 5_000 + "]" * 5_000),
    call("edit_file", '{"path": "app.py", "old_text": ' + '{"a": ' * 5_000 + "1" + "}" * 5_001),
    call("read_file", '{"path": "app.py", "start_line": ' + "9" * 5_000 + "}"),
)

SURROGATES = turn(
    call("create_file", '{"path": "a\\ud800.py", "content": "x = 1\\n"}'),
    call("create_file", '{"path": "b.py", "content": "s = \'\\udc80\'\\n"}'),
    call("search", '{"pattern": "\\ud800"}'),
)

WRONG_TYPES = turn(
    call("read_file", {"path": 5}),
    call("read_file", {"path": "app.py", "start_line": "2"}),
    call("read_file", {"path": "app.py", "start_line": 10**20}),
    call("edit_file", {"path": "app.py", "old_text": "a", "new_text": "b", "replace_all": "yes"}),
    call("run_command", {"command": "true", "timeout": 10**30}),
    call("read_file", "null"),
    call("x" * 10_000, {}),
)

HUGE_READS = turn(
    call("read_file", {"path": "huge.js"}),
    call("read_file", {"path": "min.js"}),
    call("read_file", {"path": "wide.txt"}),
    call("read_file", {"path": "wide.txt", "start_line": 101}),
)

BACKTRACKING = turn(
    call("search", {"pattern": "(a|aa)+$"}),
    call("search", {"pattern": "(a+)+$"}),
    call("search", {"pattern": "(?:(?:a{1000}){1000}){1000}"}),
    call("search", {"pattern": "x" * 1_001}),
)

ODD_LINE_ENDS = turn(
    call("read_file", {"path": "odd.txt", "start_line": 3}),
    call("search", {"pattern": "six", "path": "odd.txt"}),
    call("edit_file", {"path": "odd.txt", "old_text": "sixx", "new_text": "6"}),
    call("edit_file", {"path": "odd.txt", "old_text": "six", "new_text": "6"}),
)

SPECIAL_FILES = turn(
    call("read_file", {"path": "pipe"}),
    call("edit_file", {"path": "pipe", "old_text": "a", "new_text": "b"}),
    call("search", {"pattern": "a", "path": "pipe"}),
)
ROUND_ONE = (
    OVERLONG_PATHS,
    LONG_COMMAND,
    DEEP_ARGUMENTS,
    SURROGATES,
    WRONG_TYPES,
    HUGE_READS,
    BACKTRACKING,
    ODD_LINE_ENDS,
    SPECIAL_FILES,
)


async def run_hostile(run_agent, root, script, *hostile, **settings):
    """Run the hostile turns, then a good read and finish; the turn must reach both."""
    run = await run_agent(root, script(*hostile, *THEN), **settings)
    results = run.of(ToolCallFinished)
    assert run.finished.reason == "finished", run.finished.summary
    assert results[-2].name == "read_file" and results[-2].ok and "def greet" in results[-2].result
    return results[:-2]


async def test_overlong_paths_are_refused_with_the_limit(git_repo, script, run_agent):
    results = await run_hostile(
        run_agent,
        git_repo,
        script,
        OVERLONG_PATHS,
    )
    long_name, created, long_path, megabyte = results
    assert long_name.error_kind == "bad_arguments"
    assert "over the 255-byte limit for one file or folder name" in long_name.result
    assert created.error_kind == "bad_arguments" and "Send a shorter path" in created.result
    assert "4,204 bytes long, over the 4,096-byte limit for a path" in long_path.result
    assert megabyte.error_kind == "bad_arguments"
    assert "over the 1,000,000-character limit for one call, so nothing was run" in megabyte.result
    assert len(megabyte.result) < 2_000  # the path is not echoed back
    assert not list(git_repo.glob("pkg/*"))


async def test_a_200_kb_command_line_is_refused_before_it_runs(git_repo, script, run_agent):
    (result,) = await run_hostile(run_agent, git_repo, script, LONG_COMMAND)
    assert result.error_kind == "bad_arguments"
    assert "The command line is 200,005 bytes, over the 100,000-byte limit" in result.result
    assert "in a file with create_file" in result.result


async def test_deeply_nested_arguments_are_malformed_json_not_a_crash(git_repo, script, run_agent):
    results = await run_hostile(
        run_agent,
        git_repo,
        script,
        DEEP_ARGUMENTS,
    )
    assert [r.error_kind for r in results] == ["malformed_json"] * 4
    for result in results[:3]:
        assert "nests arrays or objects more than 64 levels deep" in result.result
        assert "Expected: " in result.result
    assert "Exceeds the limit (4300 digits)" in results[3].result


async def test_lone_surrogates_in_paths_and_content_are_named(git_repo, script, run_agent):
    results = await run_hostile(
        run_agent,
        git_repo,
        script,
        SURROGATES,
    )
    assert [r.error_kind for r in results] == ["bad_arguments"] * 3
    assert "'path' holds a lone UTF-16 surrogate (\\ud800 at character 1)" in results[0].result
    assert "'content' holds a lone UTF-16 surrogate (\\udc80 at character 5)" in results[1].result
    assert "Send the real characters" in results[1].result
    assert not (git_repo / "b.py").exists()
    assert all(r.result.isascii() for r in results)  # nothing unencodable goes to the store


async def test_wrong_types_and_unknown_tools_are_schema_errors(git_repo, script, run_agent):
    results = await run_hostile(
        run_agent,
        git_repo,
        script,
        WRONG_TYPES,
    )
    kinds = [r.error_kind for r in results]
    assert kinds == ["bad_arguments"] * 5 + ["malformed_json", "unknown_tool"]
    assert "'path' must be string, got integer 5" in results[0].result
    assert "'start_line' must be integer, got string \"2\"" in results[1].result
    assert "'start_line' is out of range" in results[2].result
    assert "'replace_all' must be boolean" in results[3].result
    assert "'timeout' is out of range" in results[4].result
    assert "must be a JSON object, got null" in results[5].result
    assert "There is no tool named 'xxx" in results[6].result and len(results[6].result) < 3_000


async def test_read_file_caps_huge_lines_and_pages(git_repo, script, run_agent):
    (git_repo / "huge.js").write_bytes(b"x" * 50_000_000)  # one 50 MB line
    (git_repo / "min.js").write_text("var a=1;" * 375_000)  # a 3 MB minified file
    (git_repo / "wide.txt").write_text("".join(f"{i:03} " + "y" * 996 + "\n" for i in range(1, 301)))  # 1,000 each
    clock = time.monotonic()
    results = await run_hostile(
        run_agent,
        git_repo,
        script,
        HUGE_READS,
    )
    assert time.monotonic() - clock < 10
    huge, minified, wide, wide_on = results
    assert all(r.ok and len(r.result) < 102_000 for r in results)
    assert huge.result.startswith("huge.js (lines 1-1 of 1)\n1| xxx")
    assert "49,900,000 more characters of line 1 not shown" in huge.result
    assert "Use search to find the part you need" in huge.result and "cut -c 100001-200000 huge.js" in huge.result
    assert "2,900,000 more characters of line 1 not shown" in minified.result
    assert wide.result.startswith("wide.txt (lines 1-100 of 300)")
    assert wide.result.endswith(
        "[200 more lines; this page stopped at the 100,000-character limit; read on with start_line=101]\n"
    )
    assert wide_on.result.startswith("wide.txt (lines 101-200 of 300)\n101| 101 yyy")


async def test_search_stops_a_backtracking_pattern_and_the_turn_goes_on(git_repo, script, run_agent):
    (git_repo / "slow.txt").write_text(("a" * 40 + "b\n") * 3)
    clock = time.monotonic()
    results = await run_hostile(
        run_agent,
        git_repo,
        script,
        BACKTRACKING,
    )
    assert time.monotonic() - clock < 8
    slow, nested, expanding, long = results
    assert slow.error_kind == "timeout" and "took over 0.5 s on a single line (slow.txt:1)" in slow.result
    assert "Simplify it" in slow.result
    assert nested.ok and nested.result == "No matches for '(a+)+$'."
    assert expanding.error_kind == "bad_arguments" and "over the limit of 20,000" in expanding.result
    assert long.error_kind == "bad_arguments" and "over the 1,000-character limit" in long.result


def test_search_shows_the_text_around_a_match_in_a_long_line(git_repo):
    (git_repo / "min.js").write_text("a" * 5_000 + "needle" + "b" * 5_000 + "\n")
    ctx = ToolContext(workspace=Workspace(git_repo), settings=Settings())
    shown = search.fn(ctx, "needle").output
    assert shown.startswith("min.js:1: ...aaa") and "aaaneedlebbb" in shown
    assert shown.endswith("... [match at column 5,001 of 10,006]")


async def test_line_numbers_count_newlines_only(git_repo, script, run_agent):
    (git_repo / "odd.txt").write_text("one\ftwo\u2028three\x1cfour\x85\nfive\u2029\nsix\n")
    results = await run_hostile(
        run_agent,
        git_repo,
        script,
        ODD_LINE_ENDS,
    )
    read, found, missed, edited = results
    assert read.result == "odd.txt (lines 3-3 of 3)\n3| six\n"
    assert found.result == "odd.txt:3: six"
    assert "The closest text in the file (lines 3-3, 86% similar):\n3| six" in missed.result
    assert edited.result == "Edited odd.txt: replaced 1 occurrence at line 3."


async def test_special_files_are_named_and_never_opened(git_repo, script, run_agent):
    os.mkfifo(git_repo / "pipe")
    results = await run_hostile(
        run_agent,
        git_repo,
        script,
        SPECIAL_FILES,
    )
    read, edit, searched = results
    assert read.error_kind == "failed"
    assert read.result.startswith(
        "pipe is a named pipe (FIFO), not a regular file; teachback reads and edits regular files only"
    )
    assert "named pipe" in edit.result and "does not exist" not in edit.result
    assert searched.ok and searched.result == "No matches for 'a'."


async def test_text_mode_deep_nesting_is_a_format_error_then_the_turn_goes_on(git_repo, script, run_agent):
    def text_call(name, arguments):
        return turn(content=f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>")

    deep = "".join("[" + " " * (i % 5) for i in range(5_000))  # uneven, or litellm stops a "repeating" stream
    model = script(
        turn(content='<tool_call>\n{"name": "read_file", "arguments": ' + deep + "\n</tool_call>"),
        turn(content=deep),
        text_call("read_file", deep),  # arguments as a string: read when the call runs, and re-rendered
        text_call("read_file", {"path": "app.py"}),
        text_call("finish", {"summary": "done"}),
    )
    run = await run_agent(git_repo, model, tool_mode="text")
    results = run.of(ToolCallFinished)
    assert run.finished.reason == "finished", run.finished.summary
    assert [r.error_kind for r in results[:3]] == ["malformed_call", "malformed_call", "malformed_json"]
    assert all("more than 64 levels deep" in r.result for r in results[:3])
    assert results[3].ok and "def greet" in results[3].result


@tool("read")
def explode(ctx: ToolContext, path: str) -> ToolResult:
    """A tool with a bug: it raises instead of returning an error result.

    Args:
        path: Any path.
    """
    raise OSError(5, "Input/output error", path)


async def test_a_tool_that_raises_is_a_tool_error_and_the_turn_goes_on(git_repo, script):
    settings = Settings(model=script(turn(call("explode", {"path": "app.py"})), *THEN), approval="full-auto")
    context = ToolContext(workspace=Workspace(git_repo), settings=settings)
    session = Session(
        model=LiteLLMModel(settings.model),
        toolbox=Toolbox((*ALL_TOOLS, explode)),
        context=context,
        frontend="test",
        system_prompt=lambda op: "You are a test.",
    )
    events = []
    session.subscribe(events.append)
    finished = await session.run(UserInput(text="go"))
    results = [e for e in events if isinstance(e, ToolCallFinished)]
    assert finished.reason == "finished"
    assert results[0].error_kind == "failed"
    assert "explode failed inside teachback (OSError: [Errno 5] Input/output error: 'app.py')" in results[0].result
    assert results[1].ok
    assert [e.kind for e in events if isinstance(e, ErrorEvent)] == ["internal"]


def test_read_file_pages_by_newline_in_a_streamed_file(git_repo):
    # Over the whole-read limit, so paged from disk in chunks; a form feed does not start a line.
    (git_repo / "big.txt").write_text("".join(f"{i}\f{i}\n" for i in range(1, 400_001)))
    ctx = ToolContext(workspace=Workspace(git_repo), settings=Settings())
    page = read_file.fn(ctx, "big.txt", 399_999).output
    assert page == "big.txt (lines 399999-400000 of 400000)\n399999| 399999\f399999\n400000| 400000\f400000\n"
