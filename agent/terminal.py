"""What a terminal outside the agent's process (an editor's, offered over ACP) reports of one command
that `run_command` ran in it: the user watches its output as it comes and may stop it there."""

from __future__ import annotations

from dataclasses import dataclass


class TerminalFailed(Exception):
    """The terminal did not run the command or did not report how it ended; the message says which
    step failed and what it answered."""


@dataclass(frozen=True)
class TerminalRun:
    """How a command ended in a terminal: `exit_code` when it exited, `signal` when it was killed (by
    the user in the editor, or at its timeout: `timed_out`); `truncated` when the terminal kept only
    the end of its output."""

    output: str
    exit_code: int | None = None
    signal: str | None = None
    timed_out: bool = False
    truncated: bool = False
