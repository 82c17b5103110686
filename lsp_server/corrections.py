"""Which lines the agent just wrote, and whether the user has since changed them.

After a turn, each file the agent modified or created is tracked with the text it left and the
line numbers it wrote. When the editor's buffer later differs from that text in or next to those
lines, the user has corrected the agent: the server records it (on save, close, or the next turn,
so one correction holds a whole round of typing rather than one keystroke).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field


def written_lines(before: str, after: str) -> frozenset[int]:
    """0-based line numbers of `after` that the change from `before` inserted or replaced."""
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    lines: set[int] = set()
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            lines.update(range(j1, j2))
    return frozenset(lines)


def touches(agent_text: str, agent_lines: frozenset[int], user_text: str) -> bool:
    """Whether `user_text` changes any of `agent_lines` of `agent_text` (or inserts among them)."""
    matcher = difflib.SequenceMatcher(a=agent_text.splitlines(), b=user_text.splitlines(), autojunk=False)
    for tag, i1, i2, _j1, _j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag == "insert":
            if i1 in agent_lines or (i1 - 1) in agent_lines:
                return True
        elif any(line in agent_lines for line in range(i1, i2)):
            return True
    return False


@dataclass
class Tracked:
    before: str  # the file when the turn started
    after: str  # what the agent left
    lines: frozenset[int]
    pending: str | None = None  # the user's latest text, once it touches the agent's lines


@dataclass
class CorrectionTracker:
    files: dict[str, Tracked] = field(default_factory=dict)

    def track(self, path: str, before: str, after: str) -> None:
        lines = written_lines(before, after)
        if lines:
            self.files[path] = Tracked(before, after, lines)

    def forget(self, path: str) -> None:
        self.files.pop(path, None)

    def observe(self, path: str, text: str) -> None:
        """Note the buffer's new text; it becomes a pending correction if it touches agent lines."""
        tracked = self.files.get(path)
        if tracked is None:
            return
        if text == tracked.after:
            tracked.pending = None
        elif tracked.pending is not None or touches(tracked.after, tracked.lines, text):
            tracked.pending = text

    def take(self, path: str) -> Tracked | None:
        """The pending correction for `path`, if any; the file is no longer tracked after it."""
        tracked = self.files.get(path)
        if tracked is None or tracked.pending is None:
            return None
        del self.files[path]
        return tracked

    def take_all(self) -> dict[str, Tracked]:
        return {path: tracked for path in list(self.files) if (tracked := self.take(path)) is not None}
