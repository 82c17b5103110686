"""The package boundaries of the README's architecture table, checked over every module's imports
(those inside functions included, and the modules the command table loads by name): the command line
is the only composition root, the store knows only the protocol, every package may stand on the floor
package and it on nothing of ours, and no two modules import each other."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from cli.commands import COMMANDS

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("cli", "common", "agent", "feedback_store", "host", "lsp_server", "acp_server", "tui", "tasks", "trainer")
COMPOSITION_ROOT = "cli"
DISPATCHER = "cli.entry"  # imports each command's module by the name the table gives
# What each package may import from the others (a package always may import itself).
ALLOWED = {
    "cli": ("agent", "feedback_store", "host", "lsp_server", "acp_server", "tui", "tasks", "trainer", "common"),
    "common": (),
    "agent": ("common",),
    "feedback_store": ("agent.protocol", "common"),
    # Opening a recorded session (store, recorder, lessons) and the worker process the doors share.
    "host": ("agent", "feedback_store", "common"),
    "lsp_server": ("agent", "feedback_store", "host", "common"),
    "acp_server": ("agent", "feedback_store", "host", "common"),
    "tui": ("agent", "feedback_store", "host", "common"),
    "tasks": ("agent", "feedback_store", "host", "common"),
    # The trainer's evaluation runs the agent on held-out tasks and serves adapters through the
    # embedded provider, so it composes agent and tasks as the tasks package composes agent.
    "trainer": ("agent", "feedback_store", "tasks", "common"),
}


@cache
def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _resolve(name: str) -> str:
    """The module an imported name denotes: itself when it is a module, else its parent."""
    while name and name not in modules() and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        anchor = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
        base = ".".join([*anchor, base] if base else anchor)
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules() else base for alias in node.names]


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(test)


def _imports(module: str, top_level_only: bool) -> set[str]:
    path = modules()[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):  # never runs
                continue
            if top_level_only and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.update(_resolve(t) for t in _targets(child, module, path.name == "__init__.py"))
            visit(child)

    visit(tree)
    if module == DISPATCHER and not top_level_only:  # the table's modules load by name, when run
        found.update(command.module for command in COMMANDS.values())
    return {name for name in found if name.split(".")[0] in PACKAGES}


def _allowed(importer: str, imported: str) -> bool:
    package, target = importer.split(".")[0], imported.split(".")[0]
    if package == target:
        return True
    if importer.endswith(".__main__") and target == COMPOSITION_ROOT:  # `python -m trainer` is the command line
        return True
    return any(imported == rule or imported.startswith(rule + ".") for rule in ALLOWED[package])


def test_every_package_imports_only_what_the_design_allows() -> None:
    wrong = {
        f"{importer} imports {imported}"
        for importer in modules()
        for imported in _imports(importer, top_level_only=False)
        if not _allowed(importer, imported)
    }
    assert sorted(wrong) == []


def test_the_command_table_names_real_commands() -> None:
    wrong = []
    for name, command in COMMANDS.items():
        if command.module not in modules() or command.module.split(".")[0] != COMPOSITION_ROOT:
            wrong.append(f"{name}: no module {command.module} in the command line's package")
            continue
        tree = ast.parse(modules()[command.module].read_text(encoding="utf-8"))
        defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        wrong += [f"{name}: {command.module} has no {f}" for f in (command.arguments, command.main) if f not in defined]
    assert wrong == []


def test_the_command_line_loads_the_other_packages_lazily() -> None:
    # What `teachback --help` loads: the dispatcher and what it imports at load time, all the way down.
    loaded, todo = set(), [DISPATCHER]
    while todo:
        module = todo.pop()
        if module not in loaded:
            loaded.add(module)
            todo += _imports(module, top_level_only=True)
    eager = {m for m in loaded if m.split(".")[0] not in ("cli", "agent", "common")}
    eager |= loaded & {command.module for command in COMMANDS.values()}
    assert sorted(eager) == []


def test_the_rules_are_the_readmes_architecture_table() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("## Architecture") :].split("\n\n| package |", 1)[1].split("\n\n", 1)[0]
    rows = {}
    for line in table.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        names = re.findall(r"`([a-z_.]+)`", cells[-1])
        rows[cells[0].strip("`/")] = sorted(n for n in names if n.split(".")[0] in PACKAGES)
    assert rows == {package: sorted(rules) for package, rules in ALLOWED.items()}


def test_no_modules_import_each_other() -> None:
    # Lazy imports count too: a cycle hidden inside a function is still two modules that need each other.
    graph = {module: _imports(module, top_level_only=False) - {module} for module in modules()}
    cycles = {"cycle " + " -> ".join(cycle) for cycle in _cycles(graph)}
    assert sorted(cycles) == []


def test_no_modules_import_each_other_at_load_time() -> None:
    graph = {module: _imports(module, top_level_only=True) - {module} for module in modules()}
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component that has one (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_the_checker_sees_imports_inside_functions_by_name_and_relative_ones() -> None:
    # The rules above pass vacuously if nothing is found: the commands' lazy imports must be seen,
    # and the modules the table loads by name.
    assert "feedback_store" in {name.split(".")[0] for name in _imports("cli.run", top_level_only=False)}
    assert {"cli.run", "cli.train"} <= _imports(DISPATCHER, top_level_only=False)
    assert "cli.run" not in _imports(DISPATCHER, top_level_only=True)
    assert "agent.protocol" in _imports("feedback_store.recording.pairs", top_level_only=True)
