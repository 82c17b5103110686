"""The tags queries: every language compiles, finds definitions and references."""

from __future__ import annotations

import pytest

from agent.repomap.tags import (
    HEADER_MAX_CHARS,
    QUERY_FILES,
    REFERENCE,
    SCOPE,
    FileTags,
    Tagger,
    header_line,
    tag_queries,
)
from tests.repomap.helpers import SAMPLES

EXPECTED = {
    "python": ("todo/models.py", {"Task", "TaskStore", "add", "mark_done", "pending", "_index", "DEFAULT_PRIORITY"}),
    "javascript": ("src/cart.js", {"Cart", "addItem", "total", "receipt"}),
    "typescript": ("src/users.ts", {"UserRepository", "get", "save", "admins", "createUser"}),
    "tsx": ("../typescript/src/UserList.tsx", {"UserList", "seed"}),
    "go": ("store.go", {"Store", "Getter", "NewStore", "Get", "Put", "ErrMissing", "DefaultCapacity"}),
    "rust": ("src/lib.rs", {"shapes", "Area", "area", "Circle", "Rect", "new", "total_area", "MAX_SHAPES"}),
    "java": ("src/shop/Order.java", {"Order", "add", "total", "main"}),
    "c": ("list.h", {"node_t", "node", "list", "list_push", "list_sum", "list_find", "LIST_MAX"}),
    "cpp": ("shape.hpp", {"Shape", "Square", "area", "describe", "total_area"}),
}


@pytest.mark.parametrize("language", sorted(QUERY_FILES))
def test_query_compiles_once_with_definitions_and_references(language: str) -> None:
    queries = tag_queries(language)
    assert tag_queries(language) is queries
    kinds = set(queries.kinds.values())
    assert REFERENCE in kinds
    assert kinds - {REFERENCE, SCOPE}


@pytest.mark.parametrize("language", sorted(EXPECTED))
def test_definitions_per_language(language: str) -> None:
    folder = "typescript" if language == "tsx" else language
    relative, names = EXPECTED[language]
    tags = Tagger().extract(language, (SAMPLES / folder / relative).read_bytes())
    assert {e.name for e in tags.definitions()} == names


def test_typescript_uses_javascript_patterns_too() -> None:
    tags = Tagger().extract("typescript", b"export function plain(a: number) { return helper(a); }\n")
    assert [e.name for e in tags.definitions()] == ["plain"]
    assert dict(tags.refs) == {"helper": 1}


def test_references_skip_definition_names_and_count() -> None:
    source = b"type Store struct{}\nfunc New() *Store { return &Store{} }\nfunc Use() { New(); New() }\n"
    tags = Tagger().extract("go", b"package p\n" + source)
    assert dict(tags.refs) == {"New": 2, "Store": 2}


def test_headers_scopes_and_round_trip() -> None:
    source = (
        b"class Outer:\n    @staticmethod\n    def build(\n        a: int,\n        b: int,\n    ) -> 'Outer':\n"
        b"        return Outer()\n"
    )
    tags = Tagger().extract("python", source)
    outer, build = tags.entries
    assert header_line(source, outer) == (0, "class Outer:")
    assert header_line(source, build) == (2, "    def build(a: int, b: int) -> 'Outer':")
    assert (outer.parent, build.parent) == (-1, 0)
    assert FileTags.from_json(tags.to_json()) == tags


def test_java_annotations_are_not_the_header() -> None:
    source = b'class A {\n    @Override\n    public String toString() { return ""; }\n}\n'
    tags = Tagger().extract("java", source)
    assert header_line(source, tags.entries[1]) == (2, "    public String toString()")


def test_long_headers_are_cut() -> None:
    source = b"def f(" + b", ".join(b"argument_%d" % i for i in range(40)) + b"):\n    pass\n"
    _, header = header_line(source, Tagger().extract("python", source).entries[0])
    assert len(header) == HEADER_MAX_CHARS
    assert header.endswith("…")
