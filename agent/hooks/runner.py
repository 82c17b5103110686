"""The hooks one session runs, a part the session owns: each event's matching hooks run at once (the
built-in ones first, in the same list), their verdicts combined, each run emitted as a HookRan, and
a hook that fails reported to the user once per session (the log has every failure)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.hooks.command import Ran, run_hook
from agent.hooks.config import HookConfig
from agent.hooks.verdicts import Verdict, combine, read_verdict
from agent.protocol import ErrorEvent, Event, HookRan

log = logging.getLogger(__name__)
BUILT_IN = "built-in"


@dataclass(frozen=True)
class BuiltinHook:
    """A PreToolUse hook that is Python, not a command: `decide(tool, target)` answers a call before
    it runs (a Verdict with decision "deny"), or None."""

    name: str
    decide: Callable[[str, str | None], Verdict | None]


class Hooks:
    """Runs the hooks of `configs` (and the built-in PreToolUse hooks) for a session on `root`;
    `emit` is the session's (None: a run nobody records, such as a state replay)."""

    def __init__(
        self,
        configs: Sequence[HookConfig] = (),
        *,
        root: Path,
        session_id: str = "",
        emit: Callable[[Event], Event] | None = None,
        builtins: Sequence[BuiltinHook] = (),
        permission_mode: str = "default",
    ) -> None:
        self.configs = tuple(configs)
        self.root = Path(root)
        self.session_id = session_id
        self.emit = emit
        self.builtins = tuple(builtins)
        self.permission_mode = permission_mode
        self._reported: set[tuple[str, str, str]] = set()

    def wants(self, event: str, subject: str | None = None) -> bool:
        """Whether any hook runs for `event` on `subject` (nothing is started when none does)."""
        return (event == "PreToolUse" and bool(self.builtins)) or any(
            c.event == event and c.matches(subject) for c in self.configs
        )

    async def run(
        self,
        event: str,
        payload: dict[str, Any],
        *,
        subject: str | None = None,
        target: str | None = None,
        call_id: str | None = None,
        cause: str | None = None,
        held: list[Event] | None = None,
    ) -> Verdict:
        """The combined verdict of `event`'s hooks for `subject` (a tool's name, a session's start).
        `target` is what a call names, for the built-in hooks. Events go to `held` when given (hooks
        that run before the session's first event is out)."""
        out = held.append if held is not None else self._emit
        if event == "PreToolUse" and subject is not None:
            for builtin in self.builtins:
                answer = builtin.decide(subject, target)
                if answer is not None and answer.decision == "deny":  # answered: nothing else needs to run
                    out(self._ran(event, builtin.name, BUILT_IN, answer, call_id, cause))
                    return answer
        matching = [c for c in self.configs if c.event == event and c.matches(subject)]
        if not matching:
            return Verdict()
        sent = {
            "session_id": self.session_id,
            "transcript_path": None,  # the session is in teachback's feedback database, not a file
            "cwd": str(self.root),
            "hook_event_name": event,
            "permission_mode": self.permission_mode,
            **payload,
        }
        verdicts = await asyncio.gather(*(self._one(c, sent, call_id, cause, out) for c in matching))
        return combine(verdicts)

    async def _one(
        self, config: HookConfig, sent: dict[str, Any], call_id: str | None, cause: str | None, out
    ) -> Verdict:
        try:
            ran = await run_hook(config.command, sent, timeout=config.timeout, root=self.root)
        except (OSError, ValueError, RuntimeError) as exc:  # a hook must never end the turn: it is skipped
            log.exception("running the %s hook %r failed", config.event, config.command)
            ran = Ran(None, start_error=f"{type(exc).__name__}: {exc}")
        verdict = read_verdict(config.event, ran, config.timeout)
        out(self._ran(config.event, config.command, config.source, verdict, call_id, cause, ran.exit_code, ran.ms))
        if verdict.problem is not None:
            self._report(config, verdict.problem, cause, out)
        if verdict.notice:
            out(self._error(cause, f"The {config.event} hook `{config.command}` says: {verdict.notice}"))
        return verdict

    def _report(self, config: HookConfig, problem: str, cause: str | None, out) -> None:
        log.warning("%s hook %r (%s) %s", config.event, config.command, config.source, problem)
        key = (config.event, config.command, problem.split(" ", 1)[0])
        if key in self._reported:
            return
        self._reported.add(key)
        message = (
            f"The {config.event} hook `{config.command}` from {config.source} {problem}. The session goes on as "
            "Claude Code's hooks reference says for a hook that fails (its approval policy still applies); fix "
            "the hook, or remove it. Further failures of this hook are only logged."
        )
        out(self._error(cause, message))

    def _ran(
        self,
        event: str,
        hook: str,
        source: str,
        verdict: Verdict,
        call_id: str | None,
        cause: str | None,
        exit_code: int | None = None,
        ms: float = 0.0,
    ) -> HookRan:
        rewrite = verdict.updated_input
        return HookRan(
            session_id=self.session_id,
            cause_id=cause,
            hook_event=event,
            hook=hook,
            source=source,
            call_id=call_id,
            decision=verdict.decision,
            reason=verdict.reason,
            updated_input=rewrite if isinstance(rewrite, dict) else None,
            context=verdict.context,
            exit_code=exit_code,
            duration_ms=ms,
            problem=verdict.problem,
        )

    def _error(self, cause: str | None, message: str) -> ErrorEvent:
        return ErrorEvent(session_id=self.session_id, cause_id=cause, kind="hook", message=message)

    def _emit(self, event: Event) -> None:
        if self.emit is not None:
            self.emit(event)
