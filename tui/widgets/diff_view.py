"""File changes as coloured unified diffs, and the list of changed files with their verdicts."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from rich.syntax import Syntax
from rich.text import Text
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from common.diffs import unified_diff as diff_of

if TYPE_CHECKING:  # annotations only: the app's first paint does not wait for the agent
    from agent.interfaces import FileChange


VERDICT_MARKS = {None: "·", "accepted": "✓", "rejected": "✗"}


def unified_diff(change: FileChange) -> str:
    return diff_of(change.path, change.before, change.after, new_rel=change.new_path)


class DiffView(Static):
    """One file's diff, syntax-highlighted."""

    diff = ""

    def show(self, change: FileChange) -> None:
        self.diff = diff = unified_diff(change)
        if not diff:
            self.update(Text(f"{change.path}: no textual change ({change.kind})", style="dim"))
            return
        self.update(Syntax(diff, "diff", theme="ansi_dark", background_color="default", word_wrap=True))


class ChangeList(OptionList):
    """The changed files, each marked with the user's verdict so far."""

    def __init__(
        self, changes: Sequence[FileChange], verdicts: Mapping[str, str] | None = None, *, id: str | None = None
    ) -> None:
        self.changes = {change.path: change for change in changes}
        given = verdicts or {}
        self.verdicts: dict[str, str | None] = {change.path: given.get(change.path) for change in changes}
        super().__init__(*(Option(self._prompt(c.path), id=c.path) for c in changes), id=id)

    def set_verdict(self, path: str, verdict: str) -> None:
        self.verdicts[path] = verdict
        self.replace_option_prompt(path, self._prompt(path))

    @property
    def current_path(self) -> str | None:
        if self.highlighted is None:
            return None
        return self.get_option_at_index(self.highlighted).id

    def _prompt(self, path: str) -> Text:
        change = self.changes[path]
        verdict = self.verdicts.get(path)
        style = {"accepted": "green", "rejected": "red"}.get(verdict or "", "")
        label = f"{change.path} → {change.new_path}" if change.new_path else change.path
        return Text.assemble((f"{VERDICT_MARKS[verdict]} ", style), (label, style), (f"  {change.kind}", "dim"))
