"""Unified diffs of one file's text, as git writes them: lines end at newlines only (str.splitlines
also ends them at form feeds and the like), `/dev/null` stands for a side that does not exist, and
git's marker follows a last line that has no newline, so the diff applies as shown."""

from __future__ import annotations

import difflib

NO_NEWLINE = "\n\\ No newline at end of file\n"


def unified_diff(rel: str, before: str | None, after: str | None, *, new_rel: str | None = None) -> str:
    """The diff from `before` to `after` (None: the file does not exist on that side) of the file
    at `rel` (at `new_rel` after a move)."""
    diff = difflib.unified_diff(
        _lines(before or ""),
        _lines(after or ""),
        fromfile="/dev/null" if before is None else f"a/{rel}",
        tofile="/dev/null" if after is None else f"b/{new_rel or rel}",
    )
    return "".join(line if line.endswith("\n") else line + NO_NEWLINE for line in diff)


def _lines(text: str) -> list[str]:
    """`text` split after each newline, as git and patch count lines."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
