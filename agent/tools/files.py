"""Read-only tools: read_file, list_files, search."""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
from pathlib import Path

import pathspec

from agent.safe_write import paths_inside
from agent.toolkit import ToolResult, error, tool
from agent.tools.context import ToolContext
from agent.workspace import MAX_READ_BYTES, WorkspaceError, decode_text

PAGE_LINES = 400
MAX_LISTED = 500
MAX_MATCHES = 100
MAX_LINE_CHARS = 300
SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".pytest_cache"}


@tool("read")
def read_file(ctx: ToolContext, path: str, start_line: int | None = None, end_line: int | None = None) -> ToolResult:
    """Read a text file, with line numbers. Long files come in pages of 400 lines.

    Args:
        path: File path relative to the workspace root.
        start_line: First line to show (1-based). Defaults to 1.
        end_line: Last line to show (inclusive). Defaults to start_line + 399.
    """
    try:
        resolved = ctx.workspace.resolve(path)
        rel = ctx.workspace.relative(resolved)
        lines = _read_lines(ctx, resolved, rel)
    except WorkspaceError as exc:
        return error(str(exc), exc.kind, target=path)
    total = len(lines)
    start = start_line or 1
    end = end_line or start + PAGE_LINES - 1
    if start < 1 or end < start:
        return error(
            f"Line range {start}-{end} is invalid: start_line must be >= 1 and end_line >= start_line.",
            "bad_arguments",
            target=rel,
        )
    if total == 0:
        return ToolResult(f"{rel} is empty (0 lines).", target=rel)
    if start > total:
        return error(f"{rel} has only {total} lines; start_line {start} is past the end.", "failed", target=rel)
    end = min(end, total, start + PAGE_LINES - 1)
    width = len(str(end))
    body = "".join(f"{n:>{width}}| {lines[n - 1]}" for n in range(start, end + 1))
    if not body.endswith("\n"):
        body += "\n"
    header = f"{rel} (lines {start}-{end} of {total})"
    footer = f"[{total - end} more lines; read on with start_line={end + 1}]\n" if end < total else ""
    return ToolResult(f"{header}\n{body}{footer}", target=rel)


def _read_lines(ctx: ToolContext, resolved: Path, rel: str) -> list[str]:
    try:
        return ctx.workspace.read_text(resolved).splitlines(keepends=True)
    except WorkspaceError as exc:
        if exc.kind != "too_large":
            raise
    # Too large to hold as one string for the model, but paging through it is fine.
    with resolved.open("rb") as handle:
        head = handle.read(8192)
    whole_lines = head if len(head) < 8192 else head[: head.rfind(b"\n") + 1] or head  # no split characters
    decode_text(whole_lines, rel)  # refuses binary and non-UTF-8 files before paging
    with resolved.open(encoding="utf-8", errors="replace") as handle:
        return handle.readlines()


@tool("read")
def list_files(ctx: ToolContext, path: str | None = None, glob: str | None = None) -> ToolResult:
    """List files under a directory (recursively), skipping what .gitignore ignores.

    Args:
        path: Directory relative to the workspace root. Defaults to the root.
        glob: Only list files whose path matches this glob, e.g. "*.py" or "src/**/*.ts".
    """
    try:
        base = ctx.workspace.resolve(path or ".")
    except WorkspaceError as exc:
        return error(str(exc), exc.kind, target=path)
    if not base.is_dir():
        return error(f"{path} is not a directory. Use read_file to read a file.", "not_found", target=path)
    files = [f for f in workspace_files(ctx.workspace.root, base) if _glob_ok(f, glob)]
    rel = ctx.workspace.relative(base)
    if not files:
        return ToolResult(f"No files under {rel}" + (f" match {glob!r}." if glob else "."), target=rel)
    shown = files[:MAX_LISTED]
    more = f"\n[{len(files) - MAX_LISTED} more; narrow with path or glob]" if len(files) > MAX_LISTED else ""
    return ToolResult("\n".join(shown) + more, target=rel)


@tool("read")
def search(ctx: ToolContext, pattern: str, path: str | None = None, glob: str | None = None) -> ToolResult:
    """Search file contents with a Python regular expression; prints path:line: text for each match.

    Args:
        pattern: Regular expression (Python syntax), e.g. "def \\w+_user" or "TODO".
        path: Directory or file to search, relative to the workspace root. Defaults to the root.
        glob: Only search files whose path matches this glob, e.g. "*.py".
    """
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        return error(
            f"{pattern!r} is not a valid regular expression ({exc}). Escape special characters such as "
            "( ) [ ] . * + ? with a backslash to match them literally.",
            "bad_arguments",
        )
    try:
        base = ctx.workspace.resolve(path or ".")
    except WorkspaceError as exc:
        return error(str(exc), exc.kind, target=path)
    root = ctx.workspace.root
    candidates = [ctx.workspace.relative(base)] if base.is_file() else workspace_files(root, base)
    matches: list[str] = []
    total = 0
    for rel in candidates:
        if not _glob_ok(rel, glob):
            continue
        try:
            text = ctx.workspace.read_text(root / rel, limit=MAX_READ_BYTES)
        except WorkspaceError:
            continue  # binary, non-UTF-8 or huge files are not searched
        for number, line in enumerate(text.splitlines(), 1):
            if regex.search(line):
                total += 1
                if len(matches) < MAX_MATCHES:
                    matches.append(f"{rel}:{number}: {line[:MAX_LINE_CHARS]}")
    if not matches:
        return ToolResult(f"No matches for {pattern!r}.", target=path or ".")
    more = f"\n[{total - MAX_MATCHES} more matches not shown; narrow the pattern, path or glob]" if total > MAX_MATCHES else ""
    return ToolResult("\n".join(matches) + more, target=path or ".")


def _glob_ok(rel: str, glob: str | None) -> bool:
    if not glob:
        return True
    return fnmatch.fnmatch(rel, glob) or fnmatch.fnmatch(os.path.basename(rel), glob)


def workspace_files(root: Path, base: Path) -> list[str]:
    """Workspace-relative paths of files under `base`, sorted, without ignored files and without
    links that lead out of the workspace."""
    listed = _git_files(root, base)
    if listed is None:
        listed = _walk_files(root, base)
    return sorted(paths_inside(root, listed))


def _git_files(root: Path, base: Path) -> list[str] | None:
    if not (root / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", str(base)],
            cwd=root, capture_output=True, check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    found = []
    for name in dict.fromkeys(out.decode("utf-8", "surrogateescape").split("\0")):
        if name.endswith("/"):  # a nested repository: git lists only its folder
            found += _walk_files(root, root / name)
        elif name and (root / name).is_file():
            found.append(name)
    return found


def _walk_files(root: Path, base: Path) -> list[str]:
    ignore_file = root / ".gitignore"
    spec = pathspec.PathSpec.from_lines(
        "gitwildmatch", ignore_file.read_text(errors="replace").splitlines() if ignore_file.is_file() else []
    )
    found = []
    for dirpath, dirnames, filenames in os.walk(base):
        rel_dir = Path(dirpath).relative_to(root)
        dirnames[:] = sorted(
            d for d in dirnames if d not in SKIP_DIRS and not spec.match_file(f"{(rel_dir / d).as_posix()}/")
        )
        for name in filenames:
            rel = (rel_dir / name).as_posix()
            if not spec.match_file(rel):
                found.append(rel)
    return found
