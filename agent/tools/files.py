"""Read-only tools: read_file, list_files, search."""

from __future__ import annotations

import codecs
import fnmatch
import os
import re
import shlex
import subprocess
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pathspec
import regex

from agent.safe_write import paths_inside
from agent.toolkit import ToolResult, error, split_lines, tool
from agent.tools.context import ToolContext
from agent.workspace import MAX_READ_BYTES, WorkspaceError, decode_text

PAGE_LINES = 400
MAX_PAGE_CHARS = 100_000  # one read_file result; a longer page ends early, a longer line is cut
STREAM_CHUNK_BYTES = 1 << 20  # files too large to read whole are paged through in chunks this size
MAX_LISTED = 500
MAX_MATCHES = 100
MAX_LINE_CHARS = 300
SEARCH_SECONDS = 5.0  # a whole search; the files searched by then are reported as such
LINE_SECONDS = 0.5  # one line taking longer means the pattern backtracks without end
MAX_PATTERN_CHARS = 1_000  # the regex module prepares a long literal in time that grows ~n^3, past its timeout
MAX_PATTERN_SIZE = 20_000  # compiled steps of a pattern (see _expanded_size)
_COUNTED = re.compile(r"\{(\d*)(?:,(\d*))?\}")
SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".pytest_cache"}


@tool("read", target="path", reads=("path",), kind="read", title=lambda a: f"Read {a.get('path')}", line="start_line")
def read_file(ctx: ToolContext, path: str, start_line: int | None = None, end_line: int | None = None) -> ToolResult:
    """Read a text file, with line numbers. Long files come in pages of 400 lines (at most 100,000
    characters; a longer line is cut).

    Args:
        path: File path relative to the workspace root.
        start_line: First line to show (1-based). Defaults to 1.
        end_line: Last line to show (inclusive). Defaults to start_line + 399.
    """
    start = start_line or 1
    end = end_line or start + PAGE_LINES - 1
    if start < 1 or end < start:
        return error(
            f"Line range {start}-{end} is invalid: start_line must be >= 1 and end_line >= start_line.",
            "bad_arguments",
            target=path,
        )
    try:
        resolved = ctx.workspace.resolve(path)
        rel = ctx.workspace.relative(resolved)
        page = _Page(start, min(end, start + PAGE_LINES - 1))
        for chunk in _text_chunks(ctx, resolved, rel):
            page.feed(chunk)
    except WorkspaceError as exc:
        return error(str(exc), exc.kind, target=path)
    total = page.finish()
    if total == 0:
        return ToolResult(f"{rel} is empty (0 lines).", target=rel)
    if start > total:
        return error(f"{rel} has only {total} lines; start_line {start} is past the end.", "failed", target=rel)
    last = page.lines[-1][0]
    width = len(str(last))
    body = "".join(f"{n:>{width}}| {text}{_cut_note(rel, n, len(text), cut)}\n" for n, text, cut in page.lines)
    footer = ""
    if last < total:
        why = f"; this page stopped at the {MAX_PAGE_CHARS:,}-character limit" if page.full else ""
        footer = f"[{total - last} more lines{why}; read on with start_line={last + 1}]\n"
    return ToolResult(f"{rel} (lines {start}-{last} of {total})\n{body}{footer}", target=rel)


class _Page:
    """Lines start..end of a text fed in chunks, numbered at "\\n" only, within MAX_PAGE_CHARS: a line
    that does not fit ends the page, unless it is the first, which is cut. Counts every line."""

    def __init__(self, start: int, end: int) -> None:
        self.start, self.end = start, end
        self.lines: list[tuple[int, str, int]] = []  # (number, text shown, characters not shown)
        self.full = False  # the page stopped early for lack of room
        self._room = MAX_PAGE_CHARS
        self._number = 1  # the line being read
        self._parts: list[str] = []  # what is kept of it (at most _room + 1 characters)
        self._kept = 0
        self._length = 0  # its whole length so far

    def _wanted(self, number: int) -> bool:
        return self.start <= number <= self.end and not self.full

    def feed(self, chunk: str) -> None:
        breaks = chunk.count("\n")  # the chunk holds lines _number .. _number + breaks
        if self.full or self._number > self.end or self._number + breaks < self.start:  # none shown: count only
            self._number += breaks
            self._length = len(chunk) - chunk.rfind("\n") - 1 if breaks else self._length + len(chunk)
            return
        for index, piece in enumerate(chunk.split("\n")):
            if index:
                self._end_line()
            if self._wanted(self._number) and self._kept <= self._room:
                kept = piece[: self._room + 1 - self._kept]
                self._parts.append(kept)
                self._kept += len(kept)
            self._length += len(piece)

    def finish(self) -> int:
        """The number of lines (a last line without "\\n" counts)."""
        if self._length:
            self._end_line()
        return self._number - 1

    def _end_line(self) -> None:
        if self._wanted(self._number):
            text = "".join(self._parts)
            if self._length <= self._room:
                self.lines.append((self._number, text, 0))
                self._room -= self._length
            else:
                if not self.lines:  # alone over the limit: shown cut, and the page ends with it
                    self.lines.append((self._number, text[: self._room], self._length - self._room))
                self.full = True
        self._number += 1
        self._parts, self._kept, self._length = [], 0, 0


def _cut_note(rel: str, number: int, shown: int, cut: int) -> str:
    if not cut:
        return ""
    return (
        f" [... {cut:,} more characters of line {number} not shown: read_file shows lines whole up to "
        f"{MAX_PAGE_CHARS:,} characters. Use search to find the part you need (it shows the text around each "
        f"match), or run_command `cut -c {shown + 1}-{shown + MAX_PAGE_CHARS} {shlex.quote(rel)}` to see the next part]"
    )


def _text_chunks(ctx: ToolContext, resolved: Path, rel: str) -> Iterator[str]:
    """The file's text (the editor's buffer if open); a file too large to hold whole is streamed."""
    try:
        yield ctx.workspace.read_text(resolved)
        return
    except WorkspaceError as exc:
        if exc.kind != "too_large":
            raise
    with ctx.workspace.open_inside(resolved) as handle:  # read_text has checked that it is a regular file
        head = handle.read(8192)
        decode_text(_whole_characters(head), rel)  # refuses binary and non-UTF-8 files before paging
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        data = head
        while data:
            yield decoder.decode(data)
            data = handle.read(STREAM_CHUNK_BYTES)
        yield decoder.decode(b"", final=True)


def _whole_characters(data: bytes) -> bytes:
    """`data` without a UTF-8 character cut off at its end."""
    end = len(data)
    while end > len(data) - 4 and end > 0 and data[end - 1] & 0xC0 == 0x80:  # continuation bytes
        end -= 1
    if end > 0 and data[end - 1] >= 0xC0:  # the lead byte of the cut character
        end -= 1
    return data[:end]


def _list_title(args: Mapping[str, Any]) -> str:
    return f"List {args.get('path') or '.'}" + (f" ({args['glob']})" if args.get("glob") else "")


def _search_title(args: Mapping[str, Any]) -> str:
    return f"Search {args.get('pattern')!r}" + (f" in {args['path']}" if args.get("path") else "")


@tool("read", target="path", reads=("path", "glob"), kind="search", title=_list_title)
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
    rel = ctx.workspace.relative(base)
    if not base.is_dir():
        # Worded as read_file words the same path, so feedback and lessons say one thing about it.
        if not ctx.workspace.exists(base):
            return error(
                f"{rel} does not exist. Use list_files or search to find the right path.", "not_found", target=path
            )
        return error(f"{rel} is a file, not a directory; use read_file to read it.", "failed", target=path)
    files = [f for f in workspace_files(ctx.workspace.root, base) if _glob_ok(f, glob)]
    if not files:
        return ToolResult(f"No files under {rel}" + (f" match {glob!r}." if glob else "."), target=rel)
    shown = files[:MAX_LISTED]
    more = f"\n[{len(files) - MAX_LISTED} more; narrow with path or glob]" if len(files) > MAX_LISTED else ""
    return ToolResult("\n".join(shown) + more, target=rel)


@tool("read", target="path", reads=("path", "glob"), kind="search", title=_search_title)
def search(ctx: ToolContext, pattern: str, path: str | None = None, glob: str | None = None) -> ToolResult:
    """Search file contents with a Python regular expression; prints path:line: text for each match.

    Args:
        pattern: Regular expression (Python syntax), e.g. "def \\w+_user" or "TODO".
        path: Directory or file to search, relative to the workspace root. Defaults to the root.
        glob: Only search files whose path matches this glob, e.g. "*.py".
    """
    deadline = time.monotonic() + SEARCH_SECONDS
    compiled = _compile(pattern)
    if isinstance(compiled, ToolResult):
        return compiled
    try:
        base = ctx.workspace.resolve(path or ".")
    except WorkspaceError as exc:
        return error(str(exc), exc.kind, target=path)
    root = ctx.workspace.root
    candidates = [ctx.workspace.relative(base)] if base.is_file() else workspace_files(root, base)
    hits = _Hits(compiled, deadline, [rel for rel in candidates if _glob_ok(rel, glob)])
    for rel in hits.files:
        try:
            text = ctx.workspace.read_text(root / rel, limit=MAX_READ_BYTES)
        except WorkspaceError as exc:
            hits.skip(exc.kind)  # binary, non-UTF-8 or huge files are not searched
            continue
        if not hits.scan(rel, text):
            break
    return hits.result(pattern, path or ".")


def _compile(pattern: str) -> regex.Pattern[str] | ToolResult:
    if len(pattern) > MAX_PATTERN_CHARS:
        return error(
            f"The pattern is {len(pattern):,} characters long, over the {MAX_PATTERN_CHARS:,}-character limit. "
            "Search for a short distinctive piece of the text instead.",
            "bad_arguments",
        )
    size = _expanded_size(pattern)
    if size > MAX_PATTERN_SIZE:
        return error(
            f"The pattern is too big to run: its counted repeats ({{n}}) expand to about {size:,} steps, over the "
            f"limit of {MAX_PATTERN_SIZE:,}. Use smaller counts ({{2,}} instead of {{1000}}) or a shorter pattern.",
            "bad_arguments",
        )
    try:
        return regex.compile(pattern)
    except (regex.error, OverflowError, RecursionError) as exc:
        reason = "it nests groups too deeply" if isinstance(exc, RecursionError) else str(exc)
        return error(
            f"{_shown(pattern)} is not a valid regular expression ({reason}). Escape special characters such as "
            "( ) [ ] . * + ? with a backslash to match them literally.",
            "bad_arguments",
        )


def _expanded_size(pattern: str) -> int:
    """About how many steps the `regex` module compiles `pattern` to. It copies a counted repeat out
    n times, so nested counts multiply: (?:(?:a{1000}){1000}){1000} would never finish compiling."""
    groups = [[0, 0]]  # per open group: [its size so far, the size of its last item]
    i = 0
    while i < len(pattern):
        char, item, after = pattern[i], 1, i + 1
        counted = _COUNTED.match(pattern, i) if char == "{" else None
        if counted and any(counted.groups("")):
            count = max(int(digits[:9] or 0) for digits in counted.groups(""))  # 9 digits: far too many already
            groups[-1][0] += groups[-1][1] * (count - 1)
            groups[-1][1] *= count
            i = counted.end()
            continue
        if char == "(":
            groups.append([0, 0])
            i = after
            continue
        if char == ")" and len(groups) > 1:
            item = max(1, groups.pop()[0])
        elif char == "\\":
            after = i + 2
        elif char == "[":
            after = _class_end(pattern, i)
        groups[-1][0] += item
        groups[-1][1] = item
        i = after
    return sum(size for size, _ in groups)


def _class_end(pattern: str, start: int) -> int:
    """The index after the character class `[...]` that opens at `start`."""
    i = start + 1
    i += pattern.startswith("^", i)
    i += pattern.startswith("]", i)  # a leading ] is a literal
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


@dataclass
class _Hits:
    """The matching lines of a search, found within its time limit."""

    pattern: regex.Pattern[str]
    deadline: float
    files: list[str]
    shown: list[str] = field(default_factory=list)
    total: int = 0
    searched: int = 0
    too_large: int = 0
    stopped: str | None = None  # "slow_pattern" or "time_limit"
    stopped_at: str = ""

    def skip(self, kind: str) -> None:
        self.too_large += kind == "too_large"

    def scan(self, rel: str, text: str) -> bool:
        """Match each line of one file; False when the search has to stop."""
        for number, line in enumerate(split_lines(text), 1):
            line = line.removesuffix("\r")
            remaining = self.deadline - time.monotonic()
            try:
                if remaining <= 0:
                    raise TimeoutError
                match = self.pattern.search(line, timeout=min(LINE_SECONDS, remaining))
            except TimeoutError:
                self.stopped = "slow_pattern" if remaining > LINE_SECONDS else "time_limit"
                self.stopped_at = f"{rel}:{number}"
                return False
            if match:
                self.total += 1
                if len(self.shown) < MAX_MATCHES:
                    self.shown.append(f"{rel}:{number}: {_excerpt(line, match)}")
        self.searched += 1
        return True

    def result(self, pattern: str, target: str) -> ToolResult:
        listing = "\n".join(self.shown)
        if self.total > MAX_MATCHES:
            listing += f"\n[{self.total - MAX_MATCHES} more matches not shown; narrow the pattern, path or glob]"
        if self.too_large:
            listing += (
                f"\n[{self.too_large} file(s) over {MAX_READ_BYTES:,} bytes not searched; use run_command "
                "with grep -n on them, or page through them with read_file]"
            )
        if self.stopped == "slow_pattern":
            found = f" Matches before it stopped:\n{listing.strip()}" if listing.strip() else ""
            return error(
                f"The pattern {_shown(pattern)} took over {LINE_SECONDS:g} s on a single line ({self.stopped_at}), so "
                "the search was stopped: it backtracks without end on some text, typically through a repeat inside "
                "a repeat such as (a+)+ or (a|aa)+. Simplify it: match a literal piece of the text you want, and "
                "avoid nested or overlapping repeats." + found,
                "timeout",
                target=target,
            )
        if self.stopped == "time_limit":
            listing += (
                f"\n[The search stopped at its {SEARCH_SECONDS:g} s limit after {self.searched} of "
                f"{len(self.files)} files (at {self.stopped_at}); files after that were not searched: "
                "narrow the path or glob to search the rest]"
            )
        if not self.shown:
            return ToolResult(f"No matches for {_shown(pattern)}.{listing}", target=target)
        return ToolResult(listing, target=target)


def _excerpt(line: str, match: regex.Match[str]) -> str:
    """The line, or for a long line the part around the match, with where it is."""
    if len(line) <= MAX_LINE_CHARS:
        return line
    begin = max(0, min(match.start() - MAX_LINE_CHARS // 3, len(line) - MAX_LINE_CHARS))
    end = begin + MAX_LINE_CHARS
    text = ("..." if begin else "") + line[begin:end] + ("..." if end < len(line) else "")
    return f"{text} [match at column {match.start() + 1:,} of {len(line):,}]"


def _shown(pattern: str) -> str:
    return repr(pattern if len(pattern) <= 200 else pattern[:200] + "...")


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
            cwd=root,
            capture_output=True,
            check=True,
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
