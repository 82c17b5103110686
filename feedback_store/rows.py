"""What the store hands back: plain frozen records, readable as attributes or by key."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


class _Keyed:
    def __getitem__(self, key: str) -> Any:
        try:
            return getattr(self, key)
        except AttributeError:
            raise KeyError(key) from None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]


@dataclass(frozen=True)
class SessionSummary(_Keyed):
    id: str
    workspace: str | None
    model: str | None
    frontend: str | None
    started_at: float | None
    title: str | None
    turns: int
    pairs: int
    flagged: bool
    updated_at: float | None = None  # the time of its last recorded event


# -- what a pair is -------------------------------------------------------------------------------
# Where a failure was seen (Pair.source).
SOURCES = ("schema", "tool", "lint", "test", "user", "hook", "monitor")
# The call named a path that is not there (or not in the workspace): the target itself was wrong, so
# the fix is the same tool on the path the model meant, which is another path.
WRONG_TARGET = frozenset({"not_found", "outside_workspace"})
# An MCP tool's own failures (its isError answer, a timeout, its server crashing): teachback does not
# know which argument was wrong, so the fix is the next success of the same tool, as for a wrong target.
MCP_FAILURES = frozenset({"failed", "timeout", "crashed"})
# A fix of a schema, repeat or wrong-target failure must come in the same turn, within this many
# assistant messages: one retry per reflection (aider reflects at most 3 times) and one look around
# (a list_files or search) before it. Later, the call that worked answers another question.
FIX_WINDOW = 4
SENT_BACK = "plan_sent_back"  # the error_kind of a plan the user sent back (agent.plan_mode)

# How an open pair gets its correction (always a call that succeeded, in a later message):
NEXT_CALL = "next_call"  # schema / repeat: the next call that succeeded, any tool (same turn, FIX_WINDOW)
SAME_TOOL = "same_tool"  # wrong target, or a hook said no: the next success of the same tool (same turn, FIX_WINDOW)
SAME_CALL = "same_call"  # other tool errors / denied: the next success of the same tool on the same target
SAME_FILE = "same_file"  # lint: the next edit of the same file that parses
SAME_COMMAND = "same_command"  # test: the edits after which the same command passed
NEXT_PLAN = "next_plan"  # a plan sent back: the next plan, or the next edit that parses
WINDOWED = (NEXT_CALL, SAME_TOOL)


@dataclass(frozen=True)
class Fix(_Keyed):
    """The event that fixed a pair, as recorded: the fixing call's id (for a test pair, the command
    that then passed), the position of the correcting message, when, whether that call succeeded (a
    recorder from before corrections had to succeed linked failed calls too) and the roles its tool
    declared (None: the built-in tool's, or no call)."""

    call_id: str | None
    seq: int | None
    at: float
    succeeded: bool
    roles: dict[str, Any] | None


@dataclass(frozen=True)
class Pair(_Keyed):
    """One failure linked to its feedback and, when one exists, its correction.

    `prompt` is every message the model saw before the failed assistant message (system first),
    `completion` that message as sent, `correction` the later assistant message that fixed it (for
    `user` pairs, an assistant message holding the user's version of the file) or None; `fix` the
    event that fixed it (None: no fixing event is recorded).
    """

    id: str
    session_id: str
    source: str  # one of SOURCES
    tool: str | None
    error_kind: str | None
    target: str | None
    feedback: str
    prompt: list[dict[str, Any]]
    completion: dict[str, Any]
    correction: dict[str, Any] | None
    tools: list[dict[str, Any]]
    model: str | None
    created_at: float
    corrected_at: float | None
    flagged: bool
    fix: Fix | None = None
