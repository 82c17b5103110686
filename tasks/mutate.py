"""Deleting a feature: the three strategies, rebuilding a mutated tree from its deleted ranges,
and the gold patch that puts the code back.

- `body`: the signature and docstring stay; the rest of the body becomes `raise
  NotImplementedError` (a stub that fails loudly: `...` would return None, which some tests accept).
- `function`: the whole definition (decorators included) goes; a block left empty gets `pass`.
- `file`: a small module is removed.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

from tree_sitter import Node

from agent.languages import get_parser
from common.diffs import unified_diff
from tasks.candidates import Candidate
from tasks.records import DeletedRange, TaskError

# The statement a `body` deletion leaves, per language; a language without one has no body tasks.
STUBS = {"python": "raise NotImplementedError"}
_TRIVIAL = frozenset({"pass", "...", "raise NotImplementedError", "raise NotImplementedError()"})
_SKIPPED_DECORATORS = ("abstractmethod", "overload")
_STRINGS = frozenset({"string", "concatenated_string"})


@dataclass(frozen=True)
class Mutation:
    candidate: Candidate
    strategy: str
    deleted: DeletedRange
    original: bytes
    mutated: bytes | None  # None: the file is removed
    kept: str  # what remains and may be quoted: the signature and docstring ("" for the others)

    @property
    def deleted_text(self) -> str:
        return self.original[self.deleted.start_byte : self.deleted.end_byte].decode("utf-8", "replace")


def mutate(candidate: Candidate, source: bytes, strategy: str) -> Mutation | None:
    """The deletion `strategy` makes of `candidate`, or None when it would delete nothing of
    substance (an abstract or trivial body, a language without a stub)."""
    if strategy == "file":
        deleted = DeletedRange(candidate.path, 1, candidate.end_line, 0, len(source), "", True)
        return Mutation(candidate, strategy, deleted, source, None, "")
    root = get_parser(candidate.language).parse(source).root_node
    outer = root.descendant_for_byte_range(candidate.start_byte, candidate.end_byte)
    if outer is None or (outer.start_byte, outer.end_byte) != (candidate.start_byte, candidate.end_byte):
        raise TaskError(f"{candidate.path} changed while tasks were being made; run synth again")
    if strategy == "body":
        return _body(candidate, source, outer)
    if strategy == "function":
        return _definition(candidate, source, outer)
    raise TaskError(f"unknown strategy {strategy!r}: use body, function or file")


def _body(candidate: Candidate, source: bytes, outer: Node) -> Mutation | None:
    stub = STUBS.get(candidate.language)
    definition = outer.child_by_field_name("definition") or outer
    body = definition.child_by_field_name("body")
    if stub is None or body is None or _has_skipped_decorator(source, outer):
        return None
    children = list(body.named_children)
    statements = [c for c in children if c.type != "comment"]
    docstring = statements[0] if statements and _is_docstring(statements[0]) else None
    rest = children[children.index(docstring) + 1 :] if docstring else children
    code = [c for c in rest if c.type != "comment"]
    if not code or all(_text(source, c) in _TRIVIAL for c in code):
        return None
    start, end = rest[0].start_byte, body.end_byte
    kept_end = docstring.end_byte if docstring else body.start_byte
    line_start = source.rfind(b"\n", 0, outer.start_byte) + 1
    kept = textwrap.dedent(source[line_start:kept_end].decode("utf-8", "replace")).rstrip()
    deleted = _range(candidate.path, source, start, end, stub)
    return Mutation(candidate, "body", deleted, source, source[:start] + stub.encode() + source[end:], kept)


def _definition(candidate: Candidate, source: bytes, outer: Node) -> Mutation:
    line_start = source.rfind(b"\n", 0, outer.start_byte) + 1
    start = line_start if not source[line_start : outer.start_byte].strip() else outer.start_byte
    line_end = source.find(b"\n", outer.end_byte)
    line_end = len(source) if line_end < 0 else line_end + 1
    end = line_end if not source[outer.end_byte : line_end].strip() else outer.end_byte
    replacement = ""
    parent = outer.parent
    if (
        candidate.language == "python"
        and parent is not None
        and parent.type == "block"
        and len([c for c in parent.named_children if c.type != "comment"]) == 1
    ):
        indent = source[line_start : outer.start_byte].decode("utf-8", "replace")
        replacement = f"{indent}pass\n"  # a class or block cannot be left empty
    deleted = _range(candidate.path, source, start, end, replacement)
    return Mutation(candidate, "function", deleted, source, source[:start] + replacement.encode() + source[end:], "")


def _range(path: str, source: bytes, start: int, end: int, replacement: str) -> DeletedRange:
    last = max(start, end - 1)
    return DeletedRange(
        path, source.count(b"\n", 0, start) + 1, source.count(b"\n", 0, last) + 1, start, end, replacement
    )


def _is_docstring(node: Node) -> bool:
    return (
        node.type == "expression_statement" and node.named_child_count == 1 and node.named_children[0].type in _STRINGS
    )


def _has_skipped_decorator(source: bytes, outer: Node) -> bool:
    if outer.type != "decorated_definition":
        return False
    decorators = [c for c in outer.named_children if c.type == "decorator"]
    return any(name in _text(source, d) for d in decorators for name in _SKIPPED_DECORATORS)


def _text(source: bytes, node: Node) -> str:
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")


def apply_deleted(tree: Path, ranges: tuple[DeletedRange, ...]) -> None:
    """Make the deletions of a task in `tree` (a copy of its snapshot)."""
    by_path: dict[str, list[DeletedRange]] = {}
    for item in ranges:
        by_path.setdefault(item.path, []).append(item)
    for path, items in sorted(by_path.items()):
        target = tree / path
        if not target.is_file():
            raise TaskError(f"the task deletes code from {path}, which its snapshot lacks; regenerate the task file")
        if any(item.removes_file for item in items):
            target.unlink()
            continue
        data = target.read_bytes()
        for item in sorted(items, key=lambda r: r.start_byte, reverse=True):
            if not 0 <= item.start_byte <= item.end_byte <= len(data):
                raise TaskError(
                    f"the deleted range {item.start_byte}-{item.end_byte} lies outside {path}; regenerate the task file"
                )
            data = data[: item.start_byte] + item.replacement.encode() + data[item.end_byte :]
        target.write_bytes(data)


def gold_patch(mutation: Mutation) -> str:
    """A git-style patch from the mutated tree back to the original (`git apply` takes it)."""
    path = mutation.candidate.path
    after = mutation.original.decode("utf-8", "surrogateescape")
    if mutation.mutated is None:
        return unified_patch(path, None, after)
    return unified_patch(path, mutation.mutated.decode("utf-8", "surrogateescape"), after)


def unified_patch(path: str, before: str | None, after: str) -> str:
    head = f"diff --git a/{path} b/{path}\n" + ("new file mode 100644\n" if before is None else "")
    return head + unified_diff(path, before, after)
