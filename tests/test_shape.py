"""The shape of the code, as figures read from the tree: the store records what a call was (nothing
downstream reads it back out of event JSON or result text), one module hosts a recorded session,
the doors name no built-in tool, and the store's rooms stay small and free of import circles.

`python -m tests.test_shape` prints the figures as one JSON object; the tests hold each to its target.
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from pathlib import Path

from tests.test_import_graph import ROOT, _cycles, _imports, modules

STORE = ROOT / "feedback_store"
DOORS = ("lsp_server", "acp_server", "tui")
HOSTS = ("cli", "agent", "lsp_server", "acp_server", "tui", "tasks", "host")
WORKERS = ("lsp_server/worker.py", "acp_server/worker.py")
LARGEST = 450  # lines, for a module of the store that is not a migration


def _product_files(*packages: str) -> list[Path]:
    return [p for package in packages for p in sorted((ROOT / package).rglob("*.py")) if (ROOT / package).is_dir()]


def _is_migration(path: Path) -> bool:
    return "migration" in path.name


@cache
def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def event_json_reads() -> list[str]:
    """Reads of an event's JSON (`json_extract(json, ...)`, `json_extract(e.json, ...)`) outside migrations."""
    pattern = re.compile(r"json_extract\((?:\w+\.)?json\b")
    return [
        f"{_rel(p)}:{n}"
        for p in _product_files("feedback_store", "cli", "tasks", "trainer")
        if not _is_migration(p)
        for n, line in enumerate(_text(p).splitlines(), 1)
        if pattern.search(line)
    ]


def exit_code_parsers() -> list[str]:
    """Modules of the store that read `[exit code N]` back out of a result's text, outside migrations."""
    return [_rel(p) for p in _product_files("feedback_store") if not _is_migration(p) and "[exit code" in _text(p)]


def correction_resolvers() -> list[str]:
    """Functions that turn a stored pair's correction (its JSON, or the message at its position) into
    a message: each `json.loads` of a value named `correction`."""
    found = []
    for path in _product_files("feedback_store", "cli", "tasks", "trainer", *DOORS):
        tree = ast.parse(_text(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for call in ast.walk(node):
                    if (
                        isinstance(call, ast.Call)
                        and ast.unparse(call.func) == "json.loads"
                        and call.args
                        and re.search(r"\bcorrection\b|\[.correction.\]", ast.unparse(call.args[0]))
                    ):
                        found.append(f"{_rel(path)}:{node.name}")
    return sorted(set(found))


def export_imports_of_recording() -> list[str]:
    return sorted(
        f"{module} imports {imported}"
        for module in modules()
        if module.startswith("feedback_store.export")
        for imported in _imports(module, top_level_only=False)
        if imported.startswith("feedback_store.recording")
    )


def session_hosts() -> list[str]:
    """Modules that both open a session and attach a recorder to it."""
    opens = re.compile(r"\bopen_session\(")
    records = re.compile(r"\battach\(|\bRecorder\(")
    return [_rel(p) for p in _product_files(*HOSTS) if opens.search(_text(p)) and records.search(_text(p))]


def worker_lines() -> int:
    return sum(len(_text(ROOT / name).splitlines()) for name in WORKERS if (ROOT / name).exists())


def door_recording_imports() -> list[str]:
    """Import lines in the doors that bring in the recorder, `attach` or the lesson book."""
    wanted = re.compile(
        r"feedback_store\.recording\.recorder|feedback_store\.recording\.recording|\battach\b|\bRecorder\b"
        r"|feedback_store\.lessons|\bLessonBook\b|\bopen_lessons\b|\bbook_for\b"
    )
    found = []
    for path in _product_files(*DOORS):
        for node in ast.walk(ast.parse(_text(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                line = ast.unparse(node)
                if line.split()[1].startswith("feedback_store") and wanted.search(line):
                    found.append(f"{_rel(path)}:{node.lineno}: {line}")
    return found


def builtin_tool_names() -> list[str]:
    text = (ROOT / "agent" / "protocol" / "builtin_roles.json").read_text(encoding="utf-8")
    return sorted(json.loads(text))


def acp_tool_names() -> list[str]:
    """Built-in tools the agent panel's door names in a string of its own."""
    names = set(builtin_tool_names())
    found = []
    for path in _product_files("acp_server"):
        for node in ast.walk(ast.parse(_text(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                found.append(f"{_rel(path)}:{node.lineno}: {node.value}")
    return found


def store_root_modules() -> list[str]:
    return sorted(p.name for p in STORE.glob("*.py"))


def large_store_files() -> dict[str, int]:
    sizes = {_rel(p): len(_text(p).splitlines()) for p in _product_files("feedback_store") if not _is_migration(p)}
    return {name: lines for name, lines in sizes.items() if lines > LARGEST}


def store_import_cycles() -> list[list[str]]:
    """Import circles among the store's modules, counting imports made only for type checking."""
    inside = {m for m in modules() if m.startswith("feedback_store")}
    graph = {}
    for module in inside:
        path = modules()[module]
        found: set[str] = set()
        for node in ast.walk(ast.parse(_text(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("feedback_store"):
                found |= {
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in inside else node.module
                    for a in node.names
                }
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in inside}
        graph[module] = {m for m in found if m in inside} - {module}
    return _cycles(graph)


def figures() -> dict[str, object]:
    return {
        "event_json_reads_outside_migrations": len(event_json_reads()),
        "store_modules_parsing_exit_code_text": len(exit_code_parsers()),
        "places_resolving_a_correction": len(correction_resolvers()),
        "export_imports_of_recording": len(export_imports_of_recording()),
        "modules_opening_and_recording_a_session": len(session_hosts()),
        "worker_module_lines": worker_lines(),
        "door_imports_of_recorder_attach_lessons": len(door_recording_imports()),
        "built_in_tool_names_in_acp_door": len(acp_tool_names()),
        "store_root_modules": len(store_root_modules()),
        "store_files_over_450_lines": large_store_files(),
        "store_import_cycles": store_import_cycles(),
    }


def test_nothing_reads_an_event_json_back_outside_migrations() -> None:
    assert event_json_reads() == []


def test_no_store_module_parses_exit_codes_out_of_text() -> None:
    assert exit_code_parsers() == []


def test_a_pair_correction_is_resolved_in_one_place() -> None:
    assert correction_resolvers() == ["feedback_store/store.py:correction_of"]


def test_export_imports_nothing_from_recording() -> None:
    assert export_imports_of_recording() == []


def test_one_module_opens_a_session_and_records_it() -> None:
    assert len(session_hosts()) == 1, session_hosts()


def test_the_two_workers_are_small() -> None:
    assert worker_lines() <= 170


def test_no_door_imports_the_recorder_attach_or_the_lesson_book() -> None:
    assert door_recording_imports() == []


def test_the_agent_panel_names_no_built_in_tool() -> None:
    assert len(builtin_tool_names()) >= 8  # the check reads real names
    assert acp_tool_names() == []


def test_the_store_root_holds_at_most_ten_modules() -> None:
    assert len(store_root_modules()) <= 10, store_root_modules()


def test_no_store_module_but_a_migration_is_over_450_lines() -> None:
    assert large_store_files() == {}


def test_the_store_has_no_import_circle() -> None:
    assert store_import_cycles() == []


def test_the_figures_see_what_they_count() -> None:
    # Each figure would pass vacuously if its scan found nothing to look at.
    assert "json_extract(e.json" in _text(STORE / "migrations.py")
    assert any("[exit code" in _text(p) for p in _product_files("agent"))
    assert any(p.name == "recorder.py" for p in _product_files("feedback_store"))
    assert store_import_cycles.__doc__ and _cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b"]]


if __name__ == "__main__":
    print(json.dumps(figures(), indent=1))
