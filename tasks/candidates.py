"""Candidate features to delete: functions, methods, classes and small modules that the test
suite exercises.

Definitions come from the same per-language tree-sitter tags queries as the repository map
(`agent/queries/<language>-tags.scm`), so another language needs only its query file and a
stub in `tasks.mutate`; which ones the tests exercise comes from a trace of the original run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tree_sitter import Node, QueryCursor

from agent.languages import get_parser, language_for_path
from agent.repomap.tags import tag_queries
from tasks.snapshot import is_test_path

FUNCTION_KINDS = frozenset({"function", "method"})
CLASS_KINDS = frozenset({"class"})
MAX_MODULE_LINES = 200
# Modules the file strategy never removes: they hold no feature of their own, however small.
SKIPPED_MODULES = frozenset({"__init__.py", "__main__.py", "setup.py", "conftest.py", "noxfile.py"})
MODULE_LINE = 0  # a trace entry (path, 0): the module was imported

Trace = set[tuple[str, int]]  # (path, first line of a code object that ran); line 0: module body


@dataclass(frozen=True)
class Candidate:
    path: str
    language: str
    kind: str  # function | method | class | module
    qualname: str  # `Class.method`; the module path for a module
    start_byte: int  # decorators included
    end_byte: int
    start_line: int  # 1-based, first decorator or the definition itself
    def_line: int  # 1-based line of the definition's keyword
    end_line: int

    @property
    def key(self) -> str:
        return f"{self.path}:{self.start_byte}:{self.end_byte}"


def find_candidates(root: Path, files: Iterable[str], strategy: str, trace: Trace | None) -> list[Candidate]:
    """Candidates for `strategy`, sorted by path and position. With a trace, only what the tests
    ran: a function whose code ran, a class with a method that ran, a module that was imported."""
    found: list[Candidate] = []
    for path in files:
        language = language_for_path(path)
        if language is None or is_test_path(path):
            continue
        source = (root / path).read_bytes()
        if strategy == "file":
            if path.rsplit("/", 1)[-1] in SKIPPED_MODULES:
                continue
            module = _module_candidate(path, language, source)
            if module is not None and (trace is None or (path, MODULE_LINE) in trace):
                found.append(module)
            continue
        for candidate in definitions(path, language, source):
            if strategy == "body" and candidate.kind not in FUNCTION_KINDS:
                continue
            if trace is None or _exercised(candidate, trace):
                found.append(candidate)
    return found


def definitions(path: str, language: str, source: bytes) -> list[Candidate]:
    """Functions, methods and classes of one file that are not nested inside a function."""
    queries = tag_queries(language)
    root = get_parser(language).parse(source).root_node
    nodes: dict[tuple[int, int], tuple[str, Node, Node]] = {}
    for pattern, captures in QueryCursor(queries.query).matches(root):
        kind = queries.kinds[pattern]
        if kind in FUNCTION_KINDS or kind in CLASS_KINDS:
            node = captures["definition." + kind][0]
            nodes.setdefault((node.start_byte, node.end_byte), (kind, node, captures["name"][0]))
    result = []
    for kind, node, name_node in (nodes[k] for k in sorted(nodes)):
        enclosing = _enclosing(node, nodes, source)
        if any(k in FUNCTION_KINDS for k, _ in enclosing):
            continue
        if kind == "function" and enclosing and enclosing[-1][0] in CLASS_KINDS:
            kind = "method"
        outer = node.parent if node.parent is not None and node.parent.type == "decorated_definition" else node
        result.append(
            Candidate(
                path=path,
                language=language,
                kind=kind,
                qualname=".".join([*(name for _, name in enclosing), _text(source, name_node)]),
                start_byte=outer.start_byte,
                end_byte=outer.end_byte,
                start_line=outer.start_point.row + 1,
                def_line=node.start_point.row + 1,
                end_line=outer.end_point.row + 1,
            )
        )
    return result


def _enclosing(
    node: Node, nodes: dict[tuple[int, int], tuple[str, Node, Node]], source: bytes
) -> list[tuple[str, str]]:
    """(kind, name) of the captured definitions around `node`, outermost first."""
    chain = []
    parent = node.parent
    while parent is not None:
        entry = nodes.get((parent.start_byte, parent.end_byte))
        if entry is not None and entry[1].type == parent.type:
            chain.append((entry[0], _text(source, entry[2])))
        parent = parent.parent
    return chain[::-1]


def _text(source: bytes, node: Node) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _exercised(candidate: Candidate, trace: Trace) -> bool:
    if candidate.kind in CLASS_KINDS:
        # A class body always runs on import: the class counts when code inside it ran.
        return any(path == candidate.path and candidate.def_line < line <= candidate.end_line for path, line in trace)
    return (candidate.path, candidate.def_line) in trace or (candidate.path, candidate.start_line) in trace


def _module_candidate(path: str, language: str, source: bytes) -> Candidate | None:
    lines = source.count(b"\n") + (0 if source.endswith(b"\n") or not source else 1)
    if not 0 < lines <= MAX_MODULE_LINES or not definitions(path, language, source):
        return None
    return Candidate(
        path=path,
        language=language,
        kind="module",
        qualname=path,
        start_byte=0,
        end_byte=len(source),
        start_line=1,
        def_line=1,
        end_line=lines,
    )
