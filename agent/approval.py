"""Approval policy: whether an edit or a command may run, must be asked about, or is refused."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Literal

from agent.config import Settings

Verdict = Literal["allow", "ask", "deny"]


@dataclass(frozen=True)
class ApprovalPolicy:
    """Modes: read-only (no edits, no commands unless allowed by a rule), ask (ask before edits and
    commands), auto-edit (ask before commands), full-auto (never ask). Command rules are shell-style
    globs on the command line; deny wins over ask, ask over allow."""

    mode: str = "ask"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    ask: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, settings: Settings) -> ApprovalPolicy:
        return cls(settings.approval, settings.allow_commands, settings.deny_commands, settings.ask_commands)

    def decide(self, action: str, command: str | None = None) -> Verdict:
        if action in ("read", "finish"):
            return "allow"
        if action == "edit":
            if self.mode == "read-only":
                return "deny"
            return "ask" if self.mode == "ask" else "allow"
        line = (command or "").strip()
        if _matches(line, self.deny):
            return "deny"
        if _matches(line, self.ask):
            return "ask"
        if _matches(line, self.allow):
            return "allow"
        if self.mode == "read-only":
            return "deny"
        return "allow" if self.mode == "full-auto" else "ask"

    def refusal(self, action: str) -> str:
        if self.mode == "read-only":
            return (
                f"This session is read-only: {action}s are not allowed. Describe the change in your "
                "answer instead, or ask the user to switch the approval mode."
            )
        return f"A rule in the approval policy denies this {action}. Do not retry it; try another approach."


def _matches(line: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(line, p) or fnmatch.fnmatchcase(line.split(" ")[0], p) for p in patterns)
