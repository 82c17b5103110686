"""Tools that change files. They only propose `FileChange`s: the session asks for approval, applies
them, checks the syntax and reports; so a refused edit never touches the disk."""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Iterable

from agent.toolkit import ToolResult, error, split_lines, tool
from agent.tools.context import ToolContext
from agent.workspace import FileChange, WorkspaceError

MAX_CREATE_CHARS = 1_000_000
# Bounds on the "closest text" search after a failed edit, so a big file or old_text stays quick.
MAX_COMPARED_CHARS = 20_000  # a longer old_text gets no closest-text suggestion
MAX_WINDOW_WORK = 100_000  # file lines x old_text lines compared window by window
MAX_ANCHORED_WINDOWS = 20
MAX_ANCHORS_PER_LINE = 1_000  # a line such as "}" occurs everywhere


@tool("edit", target="path", reads=("path",), writes=("path",), kind="edit", title=lambda a: f"Edit {a.get('path')}")
def edit_file(ctx: ToolContext, path: str, old_text: str, new_text: str, replace_all: bool = False) -> ToolResult:
    """Replace exact text in a file. old_text must match the file exactly (whitespace included) and
    only once, unless replace_all is true. Include a few surrounding lines to make it unique.

    Args:
        path: File path relative to the workspace root.
        old_text: The exact text to replace, copied from the file.
        new_text: The text to put in its place.
        replace_all: Replace every occurrence instead of requiring exactly one.
    """
    try:
        resolved = ctx.workspace.resolve_writable(path)
        rel = ctx.workspace.relative(resolved)
        content = ctx.workspace.read_text(resolved)
    except WorkspaceError as exc:
        hint = " To make a new file, use create_file." if exc.kind == "not_found" else ""
        return error(str(exc) + hint, exc.kind, target=path)
    if old_text == "":
        return error(
            "old_text is empty. Copy the exact lines to replace from the file (read_file shows them); "
            "to write a whole new file use create_file.",
            "bad_arguments",
            target=rel,
        )
    if old_text == new_text:
        return error("old_text and new_text are identical; nothing would change.", "bad_arguments", target=rel)
    count = content.count(old_text)
    if count == 0:
        return error(_no_match_message(rel, content, old_text), "no_match", target=rel)
    if count > 1 and not replace_all:
        lines = _match_lines(content, old_text)
        more = ", ..." if count > len(lines) else ""
        return error(
            f"old_text matches {count} places in {rel} (lines {', '.join(map(str, lines))}{more}). Include more "
            "surrounding lines so it matches exactly one place, or pass replace_all=true to replace all of them.",
            "ambiguous",
            target=rel,
        )
    first_line = content[: content.index(old_text)].count("\n") + 1
    updated = content.replace(old_text, new_text) if replace_all else content.replace(old_text, new_text, 1)
    where = f"{count} occurrences" if count > 1 else f"1 occurrence at line {first_line}"
    return ToolResult(
        f"Edited {rel}: replaced {where}.",
        target=rel,
        changes=[FileChange(rel, "modify", content, updated)],
    )


@tool("edit", target="path", writes=("path",), kind="edit", title=lambda a: f"Create {a.get('path')}")
def create_file(ctx: ToolContext, path: str, content: str) -> ToolResult:
    """Create a new file with the given content (parent directories are created). Fails if the file
    exists: change existing files with edit_file.

    Args:
        path: New file path relative to the workspace root.
        content: The whole text of the file.
    """
    try:
        resolved = ctx.workspace.resolve_writable(path)
    except WorkspaceError as exc:
        return error(str(exc), exc.kind, target=path)
    rel = ctx.workspace.relative(resolved)
    if ctx.workspace.exists(resolved):
        return error(
            f"{rel} already exists. Use edit_file to change it (read_file shows its current text), or "
            "delete_file first if you mean to replace it entirely.",
            "exists",
            target=rel,
        )
    if len(content) > MAX_CREATE_CHARS:
        return error(
            f"content is {len(content):,} characters, over the {MAX_CREATE_CHARS:,} limit.", "too_large", target=rel
        )
    return ToolResult(
        f"Created {rel} ({content.count(chr(10)) + 1} lines).",
        target=rel,
        changes=[FileChange(rel, "create", None, content)],
    )


@tool("edit", target="path", writes=("path",), kind="delete", title=lambda a: f"Delete {a.get('path')}")
def delete_file(ctx: ToolContext, path: str) -> ToolResult:
    """Delete a file.

    Args:
        path: File path relative to the workspace root.
    """
    try:
        resolved = ctx.workspace.resolve_writable(path)
        rel = ctx.workspace.relative(resolved)
        if resolved.is_dir():
            return error(f"{rel} is a directory; delete_file removes single files.", "failed", target=rel)
        content = ctx.workspace.read_text(resolved)
    except WorkspaceError as exc:
        return error(str(exc), exc.kind, target=path)
    return ToolResult(f"Deleted {rel}.", target=rel, changes=[FileChange(rel, "delete", content, None)])


@tool(
    "edit",
    target="src",
    reads=("src",),
    writes=("src", "dst"),
    kind="move",
    title=lambda a: f"Move {a.get('src')} to {a.get('dst')}",
)
def move_file(ctx: ToolContext, src: str, dst: str) -> ToolResult:
    """Move or rename a file. Fails if the destination exists.

    Args:
        src: Existing file path relative to the workspace root.
        dst: New file path relative to the workspace root.
    """
    try:
        source = ctx.workspace.resolve_writable(src)
        target = ctx.workspace.resolve_writable(dst)
        rel_src, rel_dst = ctx.workspace.relative(source), ctx.workspace.relative(target)
        content = ctx.workspace.read_text(source)
    except WorkspaceError as exc:
        return error(str(exc), exc.kind, target=src)
    if ctx.workspace.exists(target):
        return error(
            f"{rel_dst} already exists; choose another destination or delete it first.", "exists", target=rel_src
        )
    return ToolResult(
        f"Moved {rel_src} to {rel_dst}.",
        target=rel_src,
        changes=[FileChange(rel_src, "move", content, content, new_path=rel_dst)],
    )


def _match_lines(content: str, needle: str, limit: int = 20) -> list[int]:
    """The line numbers of the first `limit` places `needle` occurs (counted as str.count does)."""
    lines, line, counted_to = [], 1, 0
    for match in re.finditer(re.escape(needle), content):
        line += content.count("\n", counted_to, match.start())
        counted_to = match.start()
        lines.append(line)
        if len(lines) == limit:
            break
    return lines


def _no_match_message(rel: str, content: str, old_text: str) -> str:
    file_lines = split_lines(content)
    old_lines = split_lines(old_text) or [old_text]
    parts = [f"old_text was not found in {rel}."]
    if _squash(old_text) and _squash(old_text) in _squash(content):
        parts.append(
            "Only whitespace differs (indentation, spaces or line breaks): copy the text exactly as the file has it."
        )
    start, ratio = _closest_window(file_lines, old_lines)
    if file_lines and ratio > 0.3:
        end = min(start + len(old_lines), len(file_lines))
        width = len(str(end))
        shown = "\n".join(f"{n + 1:>{width}}| {file_lines[n]}" for n in range(start, end))
        parts.append(f"The closest text in the file (lines {start + 1}-{end}, {ratio:.0%} similar):\n{shown}")
    parts.append(
        "Nothing was changed. Send edit_file again with old_text copied exactly from the file "
        "(read_file shows the current text)."
    )
    return "\n".join(parts)


def _squash(text: str) -> str:
    return " ".join(text.split())


def _closest_window(file_lines: list[str], old_lines: list[str]) -> tuple[int, float]:
    """The start of the window of len(old_lines) file lines most similar to old_lines. Every window
    is compared when that is cheap; in a big file only those where a line of old_text lines up."""
    size = len(old_lines)
    target = "\n".join(line.strip() for line in old_lines)
    if len(target) > MAX_COMPARED_CHARS:
        return 0, 0.0
    best, best_ratio = 0, 0.0
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(target)
    starts: Iterable[int] = range(max(1, len(file_lines) - size + 1))
    if len(file_lines) * size > MAX_WINDOW_WORK:
        starts = _anchored_starts(file_lines, old_lines)
    for start in starts:
        window = "\n".join(line.strip() for line in file_lines[start : start + size])
        matcher.set_seq1(window)
        if matcher.real_quick_ratio() <= best_ratio or matcher.quick_ratio() <= best_ratio:
            continue
        ratio = matcher.ratio()
        if ratio > best_ratio:
            best, best_ratio = start, ratio
    return best, best_ratio


def _anchored_starts(file_lines: list[str], old_lines: list[str]) -> list[int]:
    """Window starts that line up a line of old_text with the same line in the file (whitespace
    aside), the ones that line up most lines first."""
    where: dict[str, list[int]] = {}
    for index, line in enumerate(file_lines):
        where.setdefault(line.strip(), []).append(index)
    votes: Counter[int] = Counter()
    for offset, line in enumerate(old_lines):
        if line.strip():
            votes.update(index - offset for index in where.get(line.strip(), [])[:MAX_ANCHORS_PER_LINE])
    return sorted(start for start, _ in votes.most_common(MAX_ANCHORED_WINDOWS) if start >= 0)
