"""Syntax checks after an edit: tree-sitter parses the file where the language is known."""

from __future__ import annotations

from tree_sitter import Node

from agent.languages import get_parser, language_for_path


def syntax_error(path: str, text: str) -> str | None:
    """A short description of the first syntax error in `text`, or None when it parses (or the
    language is unknown)."""
    language = language_for_path(path)
    if language is None:
        return None
    tree = get_parser(language).parse(text.encode("utf-8"))
    if not tree.root_node.has_error:
        return None
    node = _first_error(tree.root_node)
    if node is None:
        return None
    line, column = node.start_point.row + 1, node.start_point.column + 1
    lines = text.splitlines()
    source_line = lines[line - 1] if line - 1 < len(lines) else ""
    what = f"missing {node.type!r}" if node.is_missing else "unexpected text"
    return f"{path}:{line}:{column}: syntax error ({what})\n{line:>5}| {source_line}\n       {' ' * (column - 1)}^"


def _first_error(node: Node) -> Node | None:
    if node.is_missing or node.type == "ERROR":
        return node
    for child in node.children:
        if child.has_error or child.is_missing:
            found = _first_error(child)
            if found is not None:
                return found
    return None
