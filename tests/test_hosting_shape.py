"""Figures of how sessions are hosted, read from the tree: one module both opens a session and
attaches its recorder; no door (language server, ACP agent, terminal app) reaches the recorder,
`attach` or the lesson book but through host/; the two worker modules stay small; the ACP door names
no built-in tool; and a new tool's kind, title and locations reach the ACP door from its declaration."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from acp_server.updates import Translator
from agent.protocol import ToolCallStarted
from agent.toolkit import Toolbox, ToolResult, tool
from agent.tools import ALL_TOOLS

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agent", "cli", "common", "feedback_store", "host", "lsp_server", "acp_server", "tui", "tasks", "trainer")
DOORS = ("lsp_server", "acp_server", "tui")
WORKERS = ("lsp_server/worker.py", "acp_server/worker.py")


def _modules() -> dict[str, ast.Module]:
    return {
        str(path.relative_to(ROOT)): ast.parse(path.read_text(encoding="utf-8"))
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def _called(tree: ast.Module) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names


def test_one_module_both_opens_a_session_and_attaches_its_recorder() -> None:
    both = [name for name, tree in _modules().items() if {"open_session", "attach"} <= _called(tree)]
    print(f"modules that open a session and attach a recorder: {len(both)} ({', '.join(both)})")
    assert both == ["host/session.py"]


def test_no_door_imports_the_recorder_attach_or_the_lesson_book() -> None:
    wanted = re.compile(r"recording\.recorder|recording\.recording|lessons\.lessons|\battach\b|\bRecorder\b")
    lines = [
        f"{name}: {ast.unparse(node)}"
        for name, tree in _modules().items()
        if name.split("/")[0] in DOORS
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom) and wanted.search(ast.unparse(node))
    ]
    print(f"door import lines of the recorder, attach or the lesson book: {len(lines)}")
    assert lines == []


def test_the_two_worker_modules_stay_small() -> None:
    total = sum(len((ROOT / path).read_text(encoding="utf-8").splitlines()) for path in WORKERS)
    print(f"lines of the two worker modules together: {total}")
    assert total <= 170


def test_the_acp_door_names_no_built_in_tool() -> None:
    names = [t.name for t in ALL_TOOLS]
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / "acp_server").rglob("*.py"))
        for name in names
        if re.search(rf"\b{name}\b", path.read_text(encoding="utf-8"))
    ]
    print(f"built-in tool names in acp_server/: {len(found)}")
    assert found == []


@tool("read", target="path", reads=("path",), kind="read", title=lambda a: f"Count lines in {a.get('path')}", line="at")
def count_lines(ctx: object, path: str, at: int | None = None) -> ToolResult:
    """Count a file's lines.

    Args:
        path: File path relative to the workspace root.
        at: The line to start counting at.
    """
    return ToolResult("0")


def test_a_new_tool_reaches_the_acp_door_by_what_it_declares(tmp_path: Path) -> None:
    args = {"path": "src/a.py", "at": 7}
    started = ToolCallStarted(
        session_id="s",
        call_id="c1",
        name="count_lines",
        arguments='{"path": "src/a.py", "at": 7}',
        step=1,
        roles=count_lines.roles.to_dict(),
        shown=Toolbox([count_lines]).shown("count_lines", args),
    )
    [update] = Translator(tmp_path).updates(started)
    assert (update.title, update.kind) == ("Count lines in src/a.py", "read")
    assert [(loc.path, loc.line) for loc in update.locations] == [(str(tmp_path / "src/a.py"), 7)]
