"""A tool declares what its arguments mean where it is defined, and nothing else needs to know: a
tool whose target argument has a name no built-in tool uses gets its target in the events, the
pairs, the monitor's checks, the lessons and the exports. Calls recorded before calls carried roles
fall back to the built-in tools' declared roles; a tool from an MCP server has none."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.config import Settings
from agent.interfaces import LessonSource
from agent.mcp.tools import McpTool
from agent.model import LiteLLMModel
from agent.protocol import ToolCallFinished, ToolCallStarted, UserInput, event_from_dict
from agent.protocol.roles import NO_ROLES, Roles, builtin_roles, roles_for
from agent.runtime import system_prompt
from agent.session import Session
from agent.toolkit import Toolbox, ToolResult, error, tool
from agent.tools import ALL_TOOLS, builtin_roles_json, builtin_roles_path, run_command
from agent.tools.context import ToolContext
from agent.workspace import Workspace, WorkspaceError
from feedback_store import Recorder, open_store
from feedback_store.export.export import export
from feedback_store.importers import claude
from feedback_store.importers.imports import import_logs
from feedback_store.lessons.book import book_for
from feedback_store.lessons.distill import refresh
from feedback_store.recording.monitor import check_call
from tests.conftest import call, turn
from tests.store.events import mixed_session


@tool("read", target="document", reads=("document",))
def open_document(ctx: ToolContext, document: str) -> ToolResult:
    """Show a document of the workspace.

    Args:
        document: The document's path, relative to the workspace root.
    """
    try:
        path = ctx.workspace.resolve(document)
    except WorkspaceError as exc:
        return error(str(exc), exc.kind)
    if not ctx.workspace.exists(path):
        return error(f"There is no document {document}; list_files shows what exists.", "not_found")
    return ToolResult(ctx.workspace.read_text(path))


MISSING = call("open_document", {"document": "notes/missing.md"})
FOUND = call("open_document", {"document": "app.py"})
GIT_HISTORY = call("open_document", {"document": ".git/ORIG_HEAD"})
NESTED = call("open_document", "[" * 100_000)


def settings_for(model: str, tmp_path: Path) -> Settings:
    return Settings(model=model, approval="full-auto", repo_map_tokens=0, db=str(tmp_path / "f.db"))


async def run_recorded(root: Path, settings: Settings, lessons: LessonSource | None = None) -> list:
    """One session whose toolbox holds the built-in tools and open_document, recorded."""
    context = ToolContext(workspace=Workspace(root), settings=settings)
    session = Session(
        model=LiteLLMModel(settings.model),
        toolbox=Toolbox([*ALL_TOOLS, open_document]),
        context=context,
        frontend="cli",
        system_prompt=lambda first: system_prompt(context, first),
        lessons=lessons,
    )
    store = open_store(settings.db_path())
    events: list = []
    session.subscribe(Recorder(store))
    session.subscribe(events.append)
    await session.run(UserInput(text="read the notes"))
    store.close()
    return events


async def test_a_tool_with_a_new_target_name_needs_no_change_elsewhere(git_repo, script, tmp_path):
    model = script(turn(MISSING), turn(FOUND), turn(GIT_HISTORY), turn(NESTED), turn(call("finish", {"summary": "x"})))
    settings = settings_for(model, tmp_path)
    events = await run_recorded(git_repo, settings)

    started = [e for e in events if isinstance(e, ToolCallStarted) and e.name == "open_document"]
    finished = [e for e in events if isinstance(e, ToolCallFinished) and e.name == "open_document"]
    assert [e.target for e in started] == ["notes/missing.md", "app.py", ".git/ORIG_HEAD", None]
    assert started[0].roles == {"target": "document", "reads": ["document"], "writes": [], "command": None}
    assert [e.target for e in finished] == ["notes/missing.md", "app.py", ".git/ORIG_HEAD", None]
    assert started[3].args is None and "levels deep" in (started[3].args_error or "")
    assert finished[3].error_kind == "malformed_json"

    store = open_store(settings.db_path())
    session_id = started[0].session_id
    assert store.query("SELECT * FROM recording_notes") == []  # the deep nesting broke no step
    pairs = {p.target: p for p in store.pairs(session_id=session_id) if p.tool == "open_document"}
    assert pairs["notes/missing.md"].error_kind == "not_found"
    assert pairs["notes/missing.md"].correction is not None  # the next open_document that worked
    flags = store.flags(session_id)
    assert [(f["rule"], f["detail"]) for f in flags] == [("reads_git_history", "path .git/ORIG_HEAD")]
    store.close()

    out = tmp_path / "sdpo.jsonl"
    export([settings.db_path()], "sdpo", out, include_flagged=True)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    missing = next(r for r in records if r["tool"] == "open_document" and r["error_kind"] == "not_found")
    assert missing["target"] == "notes/missing.md"
    chosen = missing["chosen"]["tool_calls"][0]["function"]  # the fix fits the prefix: its path was there
    assert chosen["name"] == "open_document" and chosen["arguments"] == {"document": "app.py"}


async def test_a_lesson_about_the_new_target_answers_the_call_before_it_runs(git_repo, script, tmp_path):
    first = script(turn(MISSING), turn(FOUND), name="first.json")
    await run_recorded(git_repo, settings_for(first, tmp_path))
    settings = settings_for(script(turn(MISSING), name="second.json"), tmp_path)
    store = open_store(settings.db_path())
    refresh(store)
    lessons = store.query("SELECT tool, error_kind, target FROM lessons")
    assert lessons == [{"tool": "open_document", "error_kind": "not_found", "target": "notes/missing.md"}]
    store.close()
    book = book_for(settings)
    events = await run_recorded(git_repo, settings, book)
    book.close()
    answered = next(e for e in events if isinstance(e, ToolCallFinished) and e.name == "open_document")
    assert answered.result.startswith("Not run: open_document on notes/missing.md failed before")
    assert 'open_document(document="app.py")' in answered.result


def test_events_recorded_before_roles_get_the_built_in_tools_roles() -> None:
    old = {
        "type": "tool_call_started",
        "session_id": "s",
        "call_id": "c",
        "name": "read_file",
        "arguments": json.dumps({"path": ".git/ORIG_HEAD"}),
        "step": 1,
        "target": ".git/ORIG_HEAD",
    }
    event = event_from_dict(old)
    assert event.call_roles == Roles(target="path", reads=("path",))
    assert [f.rule for f in check_call(event.name, event.args, event.roles)] == ["reads_git_history"]
    unknown = event_from_dict({**old, "name": "open_document"})  # no built-in tool: nothing is guessed
    assert unknown.call_roles == NO_ROLES and check_call(unknown.name, unknown.args, unknown.roles) == []


def test_the_fallback_file_is_the_built_in_tools_declarations() -> None:
    assert builtin_roles_path().read_text(encoding="utf-8") == builtin_roles_json(), "run: python -m agent.tools"
    assert builtin_roles() == {t.name: t.roles for t in ALL_TOOLS}
    assert roles_for("run_command") == run_command.roles == Roles(target="command", command="command")


def test_roles_must_name_parameters() -> None:
    with pytest.raises(TypeError, match="roles name no parameter: file"):

        @tool("read", target="file")
        def peek(ctx: ToolContext, document: str) -> ToolResult:
            """Peek.

            Args:
                document: The document.
            """
            return ToolResult(document)


@pytest.mark.parametrize(
    "recorded",
    [{"target": 3, "reads": "document", "writes": [None, "x"], "command": ["ls"]}, "target", ["document"]],
)
def test_recorded_roles_are_read_not_trusted(recorded) -> None:
    roles = roles_for("anything", recorded)
    assert roles.target is None and roles.reads == () and roles.command is None
    assert roles.target_of({"x": "y"}) is None and roles.paths_read(None) == []


def test_a_tool_from_an_mcp_server_has_no_roles() -> None:
    """An MCP server says nothing of what its arguments mean: no target, no path, no command line,
    so the monitor checks none of its arguments and its calls and pairs name no target."""
    listed = SimpleNamespace(
        name="run",
        description="Run a shell command.",
        input_schema={"type": "object", "properties": {"command": {"type": "string"}, "path": {"type": "string"}}},
    )
    shell = McpTool.from_listing("box", listed, set(), lambda *_: None)
    assert shell.roles == NO_ROLES
    toolbox = Toolbox(ALL_TOOLS).extended([shell])
    arguments = {"command": "git log -p", "path": ".git/ORIG_HEAD"}
    assert toolbox.roles(shell.name).target_of(arguments) is None
    assert check_call(shell.name, arguments, toolbox.roles(shell.name).to_dict()) == []


def test_an_imported_agents_calls_are_checked_by_its_tools_roles(tmp_path: Path) -> None:
    """Claude Code's tools declare their roles beside their schemas: a Bash command line that reads
    the git history, and a file its Read was asked for in the object store, are flagged."""
    logs = Path(__file__).parent / "data" / "agent_logs" / "claude-code" / "-home-dev-shop"
    text = (logs / "0a1b2c3d-0000-4000-8000-000000000002.jsonl").read_text(encoding="utf-8")
    assert text.count('"command": "pytest -q"') and text.count('"file_path": "/home/dev/shop/src/cart.py"')
    text = text.replace('"command": "pytest -q"', '"command": "git log -p && pytest -q"', 1)
    text = text.replace('"file_path": "/home/dev/shop/src/cart.py"', '"file_path": "/home/dev/shop/.git/ORIG_HEAD"')
    log = tmp_path / "-home-dev-shop" / "0a1b2c3d-0000-4000-8000-000000000002.jsonl"
    log.parent.mkdir()
    log.write_text(text, encoding="utf-8")
    with open_store(tmp_path / "f.db") as store:
        import_logs(store, claude.AGENT, claude.find_files(tmp_path), lambda p: claude.read(p, none))
        flags = {(f["rule"], f["detail"]) for f in store.flags()}
    assert ("reads_git_history", "command: git log") in flags
    assert ("reads_git_history", "path /home/dev/shop/.git/ORIG_HEAD") in flags


def none(_: Path) -> None:
    return None


def test_a_store_recorded_before_calls_carried_roles_gives_the_same_pairs_and_exports(tmp_path: Path) -> None:
    """Started events without roles in the store (as every recorder before them wrote): the pairs
    and the exports' corrections come out as they do with roles, from the built-in tools' roles."""
    session = mixed_session(session_id="s1")
    now = tmp_path / "now.db"
    with open_store(now) as store:
        Recorder(store).record_many(session.events)
    before = tmp_path / "before.db"
    with open_store(before) as store:
        recorder = Recorder(store)
        for event in session.events:
            recorder(event)
            with store.write() as conn:
                conn.execute("UPDATE events SET json = json_remove(json, '$.roles')")
        assert store.query("SELECT count(*) AS n FROM events WHERE json_extract(json, '$.roles') IS NOT NULL") == [
            {"n": 0}
        ]
    shown = "SELECT source, tool, error_kind, target, completion_seq, correction_seq FROM pairs ORDER BY id"
    with open_store(now) as a, open_store(before) as b:
        assert a.query(shown) == b.query(shown) and {r["source"] for r in a.query(shown)} >= {"test", "tool", "lint"}
    records = []
    for name, db in (("now", now), ("before", before)):
        export([db], "sdpo", tmp_path / f"{name}.jsonl")
        records.append([json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()])
        for record in records[-1]:
            record["provenance"].pop("author")  # keyed by each store's own secret
    assert records[0] == records[1] and any(r["chosen"] for r in records[0])
