"""Definitions and references of one source file, from tree-sitter tags queries.

The queries are data files in `agent/queries/` (`<language>-tags.scm`), following the tags
convention of the grammar packages: `@name` plus `@definition.<kind>` or `@reference.<kind>`,
and `@scope` for nodes that only enclose definitions (a Rust `impl`, a C++ namespace).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass
from importlib import resources

from tree_sitter import Node, Parser, Query, QueryCursor

from agent.languages import get_language
from common.text import clip

# Query files combined per language: TypeScript's own file covers only TS-only nodes.
QUERY_FILES: dict[str, tuple[str, ...]] = {
    "python": ("python",),
    "javascript": ("javascript",),
    "typescript": ("javascript", "typescript"),
    "tsx": ("javascript", "typescript"),
    "go": ("go",),
    "rust": ("rust",),
    "java": ("java",),
    "c": ("c",),
    "cpp": ("cpp",),
}

# Bump when the shape of extracted tags changes: cached tags of another version are re-parsed.
TAGS_FORMAT = 2
HEADER_MAX_CHARS = 160
_HEADER_SCAN_BYTES = 600
_SPACE_AFTER_OPEN = re.compile(r"([(\[]) ")
_SPACE_BEFORE_CLOSE = re.compile(r",? ([)\]])")


@dataclass(frozen=True, slots=True)
class Entry:
    """A definition (`name` set) or an enclosing scope (`kind == "scope"`, `name == ""`).

    `start` is the byte offset of the definition, `header_end` the end of its header (the start
    of its body, or of its first line's end); `parent` is the index of the enclosing entry, or
    -1. The header text itself is only built for the lines a map shows: see `header_line`.
    """

    name: str
    kind: str
    start: int
    header_end: int
    parent: int


@dataclass(frozen=True, slots=True)
class FileTags:
    entries: tuple[Entry, ...]
    refs: tuple[tuple[str, int], ...]  # (identifier, count), sorted by identifier

    def definitions(self) -> list[Entry]:
        return [e for e in self.entries if e.name]

    def to_json(self) -> str:
        return json.dumps(
            {
                "e": [[e.name, e.kind, e.start, e.header_end, e.parent] for e in self.entries],
                "r": [list(r) for r in self.refs],
            },
            ensure_ascii=False,
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> FileTags:
        data = json.loads(text)
        return cls(tuple(Entry(*e) for e in data["e"]), tuple((n, c) for n, c in data["r"]))


EMPTY_TAGS = FileTags((), ())


REFERENCE = "reference"
SCOPE = "scope"


@dataclass(frozen=True)
class TagQueries:
    """One language's tags query, and what each of its patterns captures."""

    query: Query
    kinds: dict[int, str]  # pattern index -> definition kind, REFERENCE or SCOPE
    fingerprint: str  # names the query text and TAGS_FORMAT, for the cache


def query_source(language: str) -> str:
    folder = resources.files("agent.queries")
    return "\n".join((folder / f"{name}-tags.scm").read_text(encoding="utf-8") for name in QUERY_FILES[language])


@functools.cache
def query_fingerprint(language: str) -> str:
    """ "<language>:<digest>" of the query text and TAGS_FORMAT: names cached tags without
    loading the grammar or compiling the query."""
    digest = hashlib.sha1(f"{TAGS_FORMAT}\n{query_source(language)}".encode()).hexdigest()[:16]
    return f"{language}:{digest}"


@functools.cache
def tag_queries(language: str) -> TagQueries:
    """The compiled query for `language`; compiled once per process."""
    source = query_source(language)
    query = Query(get_language(language), source)
    raw = source.encode("utf-8")
    kinds: dict[int, str] = {}
    for index in range(query.pattern_count):
        pattern = raw[query.start_byte_for_pattern(index) : query.end_byte_for_pattern(index)]
        kind = _pattern_kind(pattern.decode("utf-8"))
        if kind is None:
            query.disable_pattern(index)
        else:
            kinds[index] = kind
    # Reference nodes themselves are never read (only their @name): not building them is faster.
    for index in range(query.capture_count):
        if query.capture_name(index).startswith("reference."):
            query.disable_capture(query.capture_name(index))
    return TagQueries(query, kinds, query_fingerprint(language))


def _pattern_kind(pattern: str) -> str | None:
    match = re.search(r"@(definition\.(\w+)|reference\.\w+|scope)\b", pattern)
    if match is None:
        return None
    if match.group(2):
        return match.group(2)
    return SCOPE if match.group(1) == SCOPE else REFERENCE


class Tagger:
    """Extracts `FileTags` from source; holds one parser per language."""

    def __init__(self) -> None:
        self._parsers: dict[str, Parser] = {}

    def extract(self, language: str, source: bytes) -> FileTags:
        parser = self._parsers.get(language)
        if parser is None:
            parser = self._parsers[language] = Parser(get_language(language))
        queries = tag_queries(language)
        root = parser.parse(source).root_node
        found: dict[tuple[int, int], tuple[str, str, Node]] = {}
        name_starts: set[int] = set()
        references: list[tuple[int, int]] = []
        kinds = queries.kinds
        for pattern, captures in QueryCursor(queries.query).matches(root):
            kind = kinds[pattern]
            if kind == REFERENCE:
                node = captures["name"][0]
                references.append((node.start_byte, node.end_byte))
                continue
            if kind == SCOPE:
                node = captures[SCOPE][0]
                name = ""
            else:
                node = captures["definition." + kind][0]
                name_node = captures["name"][0]
                name = source[name_node.start_byte : name_node.end_byte].decode("utf-8", "replace")
                name_starts.add(name_node.start_byte)
            # The first pattern wins when two match the same node (e.g. a method and a function).
            found.setdefault((node.start_byte, -node.end_byte), (name, kind, node))
        counts = Counter(source[start:end] for start, end in references if start not in name_starts)
        refs = tuple(sorted((name.decode("utf-8", "replace"), count) for name, count in counts.items()))
        return FileTags(_entries(found, source), refs)


def _entries(found: dict[tuple[int, int], tuple[str, str, Node]], source: bytes) -> tuple[Entry, ...]:
    entries: list[Entry] = []
    stack: list[tuple[int, int]] = []  # (end_byte, entry index) of open enclosing entries
    for (start, neg_end), (name, kind, node) in sorted(found.items()):
        end = -neg_end
        while stack and stack[-1][0] < end:
            stack.pop()
        parent = stack[-1][1] if stack else -1
        entries.append(Entry(name, kind, start, _header_end(node, source), parent))
        stack.append((end, len(entries) - 1))
    return tuple(entries)


def _header_end(node: Node, source: bytes) -> int:
    start = node.start_byte
    limit = start + _HEADER_SCAN_BYTES
    body = node.child_by_field_name("body")
    if body is not None and body.start_byte > start:
        return min(body.start_byte, limit)
    end = source.find(b"\n", start, limit)
    return end if end >= 0 else min(node.end_byte, limit)


def header_line(source: bytes, entry: Entry) -> tuple[int, str]:
    """(0-based line, header text): the definition's source from the start of its line to its
    body, on one line, with the original indentation."""
    line_start = source.rfind(b"\n", 0, entry.start) + 1
    text = source[line_start : entry.header_end].rstrip().decode("utf-8", "replace")
    if "\t" in text:
        text = text.expandtabs(4)
    code = text.lstrip()
    indent = text[: len(text) - len(code)]
    line = source.count(b"\n", 0, entry.start)
    if "\n" in code:
        lines = code.split("\n")
        while len(lines) > 1 and lines[0].lstrip().startswith("@"):
            del lines[0]  # Java/TypeScript annotations: the signature is what follows
            line += 1
            indent = lines[0][: len(lines[0]) - len(lines[0].lstrip())]
        code = " ".join(" ".join(lines).split())
        code = _SPACE_BEFORE_CLOSE.sub(r"\1", _SPACE_AFTER_OPEN.sub(r"\1", code))
    code = code.removesuffix("{").rstrip()
    return line, indent + clip(code, HEADER_MAX_CHARS)
