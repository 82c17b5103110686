"""Only feedback_store/ speaks SQL to the feedback database: every other package calls a named
method of the store. Checked over the source of every package and bench script (tests excepted):
no SQL text naming a table of the store's schema (read from a freshly migrated database), and no
`.execute(` / `.query(` on a store, its raw database or a write transaction's connection."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from feedback_store.store import open_store

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("cli", "common", "agent", "lsp_server", "acp_server", "tui", "tasks", "trainer", "bench")
# Bench scripts whose measurement is raw SQLite itself, so they must speak SQL to the schema.
EXCEPTED = {
    "bench/export_bench.py": "times export beside a raw SELECT + json.dumps baseline, and clones recorded "
    "sessions in SQL to reach 100k pairs in seconds",
    "bench/lessons_bench.py": "writes 100k synthetic pairs straight into the schema, with and without its "
    "lesson triggers, to time their cost and retrieval at scale",
}
SQL_CALLS = frozenset({"execute", "executemany", "executescript", "query"})
STORE_NAME = re.compile(r"(^|\.)_?store(\.|$)")
NAME = r"""[\s"'`\[]*(?:{tables})\b"""
# Each statement needs its own words in SQL's order, so prose such as "pairs from sessions you
# select" is not taken for SQL.
STATEMENTS = (
    r"\bselect\b[\s\S]*?\b(?:from|join)" + NAME,
    r"\bdelete\s+from" + NAME,
    r"\b(?:insert|replace)\s+(?:or\s+\w+\s+)?into" + NAME,
    r"\bupdate\s+(?:or\s+\w+\s+)?" + NAME + r"\s+set\b",
    r"\b(?:drop|alter)\s+table\s+(?:if\s+exists\s+)?" + NAME,
    r"\bcreate\s+(?:unique\s+)?(?:index|trigger)\b[^;]*?\bon" + NAME,
)


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> frozenset[str]:
    with open_store(tmp_path_factory.mktemp("schema") / "feedback.db") as store:
        rows = store.query("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
    return frozenset(row["name"] for row in rows if not row["name"].startswith("sqlite_"))


def _text(node: ast.AST) -> str | None:
    """A string literal's text (an f-string's holes as `?`, `+` joins followed), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(part) or "?" for part in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return None if left is None or right is None else left + right
    return None


def sql_naming_tables(source: str, tables: frozenset[str]) -> list[str]:
    names = "|".join(sorted(map(re.escape, tables), key=len, reverse=True))
    patterns = [re.compile(statement.format(tables=names), re.I) for statement in STATEMENTS]
    found: list[str] = []
    inside: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        text = None if id(node) in inside else _text(node)
        if text is None:
            continue
        inside.update(id(child) for child in ast.walk(node))
        for pattern in patterns:
            hit = pattern.search(text)
            if hit:
                found.append(f"line {node.lineno}: {hit.group(0).strip()!r}")
                break
    return found


SCOPES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of one scope (a module or a function), without those of the scopes inside it."""
    out, todo = [], list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        out.append(node)
        if not isinstance(node, SCOPES):
            todo.extend(ast.iter_child_nodes(node))
    return out


def _store_names(nodes: list[ast.AST]) -> set[str]:
    """Names bound to a store, its raw database or one of its connections: `x = open_store(...)`,
    `with open_store(...) as x`, `with store.write() as conn`, `db = store.db`, a parameter typed Store."""
    bound: set[str] = set()
    for node in nodes:
        if isinstance(node, SCOPES[1:3]):
            arguments = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            bound.update(a.arg for a in arguments if a.annotation and "Store" in ast.unparse(a.annotation))
        pairs = []
        if isinstance(node, ast.Assign):
            pairs = [(target, node.value) for target in node.targets]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            pairs = [(node.optional_vars, node.context_expr)]
        for target, value in pairs:
            text = ast.unparse(value)
            if isinstance(target, ast.Name) and ("open_store(" in text or STORE_NAME.search(text.split("(")[0])):
                bound.add(target.id)
    return bound


def sql_calls_on_store(source: str) -> list[str]:
    return _scan(ast.parse(source), frozenset())


def _scan(scope: ast.AST, outer: frozenset[str]) -> list[str]:
    """SQL calls on a store, and any use of its raw database (`store.db`), in one scope; a name
    bound to a store in an enclosing scope counts in the scopes inside it."""
    nodes = _own_nodes(scope)
    bound = outer | _store_names([scope, *nodes])

    def on_store(receiver: ast.AST) -> bool:
        text = ast.unparse(receiver)
        return bool(STORE_NAME.search(text)) or text.split(".")[0].split("[")[0] in bound

    found = []
    for node in nodes:
        if isinstance(node, SCOPES):
            found += _scan(node, bound)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SQL_CALLS:
            if on_store(node.func.value):
                found.append(f"line {node.lineno}: {ast.unparse(node.func)}(...)")
        elif isinstance(node, ast.Attribute) and node.attr == "db" and on_store(node.value):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def scanned_files() -> list[Path]:
    return sorted(path for package in SCANNED for path in (ROOT / package).rglob("*.py"))


def test_the_schema_is_read_from_a_migrated_database(tables: frozenset[str]) -> None:
    assert {"sessions", "events", "messages", "tool_calls", "pairs", "lessons", "learning_rounds"} <= tables


def test_no_package_outside_the_store_speaks_sql_to_its_tables(tables: frozenset[str]) -> None:
    offences = {}
    for path in scanned_files():
        name = path.relative_to(ROOT).as_posix()
        if name in EXCEPTED:
            continue
        source = path.read_text(encoding="utf-8")
        found = sql_naming_tables(source, tables) + sql_calls_on_store(source)
        if found:
            offences[name] = found
    assert not offences, f"call a named method of feedback_store instead: {offences}"


def test_the_excepted_bench_scripts_exist_and_still_need_it(tables: frozenset[str]) -> None:
    for name in EXCEPTED:
        source = (ROOT / name).read_text(encoding="utf-8")
        assert sql_naming_tables(source, tables) or sql_calls_on_store(source), (
            f"{name} no longer speaks SQL: drop it from EXCEPTED"
        )


@pytest.mark.parametrize(
    "source",
    [
        'with store.write() as conn:\n    conn.execute("UPDATE sessions SET config = ? WHERE id = ?", (c, i))\n',
        'rows = book.store.query("SELECT id FROM lessons WHERE deleted = 0")\n',
        'def f(feedback: Store):\n    return feedback.query(f"select * from {t}")\n',
        "with open_store(p) as s:\n    s.db.execute(sql)\n",
        'feedback = open_store(p)\n\n\ndef add(row):\n    feedback.db["pairs"].insert(row)\n',
        'conn = sqlite3.connect(path)\nconn.execute("INSERT INTO " + "pairs (id) VALUES (?)", (1,))\n',
        'q = f"""SELECT m.seq FROM messages m\n JOIN "tool_calls" t ON t.seq = m.seq WHERE m.id = {x}"""\n',
    ],
)
def test_the_check_finds_sql_against_the_store(source: str, tables: frozenset[str]) -> None:
    assert sql_naming_tables(source, tables) or sql_calls_on_store(source)


@pytest.mark.parametrize(
    "source",
    [
        'for field in self.query("#filters Input").results(Input):\n    pass\n',
        'db.execute("SELECT tags FROM tags WHERE content_hash = ?", key)\n',
        'help = "export the pairs from sessions you select, then update the lessons"\n',
        "store.mark_task(session_id, meta)\n",
    ],
)
def test_the_check_leaves_other_databases_and_prose_alone(source: str, tables: frozenset[str]) -> None:
    assert not sql_naming_tables(source, tables) and not sql_calls_on_store(source)
