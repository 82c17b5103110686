"""Lessons from earlier sessions as a session shows them, a part the session owns: a block for the
system prompt, a known failure that answers a call before it runs, and lessons after a failing call
(each shown once); every lesson shown is emitted as LessonsShown."""

from __future__ import annotations

import logging
from collections.abc import Callable

from agent.config import Settings
from agent.hooks.runner import BuiltinHook
from agent.hooks.verdicts import Verdict
from agent.interfaces import LessonSource
from agent.protocol import REPEAT_ERRORS, Event, Lesson, Lessons, LessonsShown, UserInput
from agent.toolkit import ToolResult
from agent.workspace import Workspace

log = logging.getLogger(__name__)
NO_LESSONS = ("interrupted", *REPEAT_ERRORS)  # failures that earlier sessions have nothing to say about


class LessonFeed:
    def __init__(
        self,
        source: LessonSource | None,
        *,
        session_id: str,
        settings: Settings,
        workspace: Workspace,
        model_name: str,
        repository: str | None,
        emit: Callable[[Event], Event],
    ) -> None:
        self.source = source
        self.id = session_id
        self.settings = settings
        self.workspace = workspace
        self.model_name = model_name
        self.repository = repository
        self.emit = emit
        self.shown: set[str] = set()  # ids shown after failing calls, not shown again

    def session_block(self, first: UserInput) -> Lessons | None:
        """The start-of-session block, lessons about what the first instruction names first (runs in
        a worker thread, before SessionStarted)."""
        if self.source is None or not self.settings.lessons or self.settings.lessons_tokens <= 0:
            return None
        source, focus = self.source, " ".join([first.text, *(ref.path for ref in first.context)])
        return self._ask(
            lambda: source.session_block(
                str(self.workspace.root),
                self.model_name,
                self.settings.lessons_tokens,
                focus,
                repository=self.repository,
            )
        )

    def known_failure(self, name: str, target: str | None) -> Lesson | None:
        """A lesson of this repository that says this call fails (its path does not exist) and what
        worked instead: the call is answered with it before it runs, a guard like the loop's."""
        if target is None or self.source is None or not self.settings.lessons:
            return None
        source = self.source
        known = self._ask(
            lambda: source.known_failure(
                tool=name, target=target, workspace=str(self.workspace.root), repository=self.repository
            )
        )
        if known is not None:
            self.shown.add(known.id)  # its text is in the answer: not shown again after it
        return known

    def guard_hook(self) -> BuiltinHook:
        """The known-failure guard as a built-in PreToolUse hook: a call this repository's lessons
        say fails is answered with the lesson before it runs."""
        return BuiltinHook("lessons", self._known_failure_verdict)

    def _known_failure_verdict(self, name: str, target: str | None) -> Verdict | None:
        known = self.known_failure(name, target)
        if known is None:
            return None
        reason = (
            f"Not run: {name} on {target} failed before in this repository because it does not exist, "
            f"and it still does not. {known.text}"
        )
        return Verdict(decision="deny", reason=reason, error_kind="not_found")

    def for_failure(self, name: str, arguments: str, result: ToolResult) -> Lessons | None:
        if result.ok or self.source is None or not self.settings.lessons or result.error_kind in NO_LESSONS:
            return None
        source = self.source
        return self._ask(
            lambda: source.for_failure(
                tool=name,
                error_kind=result.error_kind,
                target=result.target,
                call=arguments,
                feedback=result.output,
                workspace=str(self.workspace.root),
                repository=self.repository,
                session_id=self.id,
                shown=frozenset(self.shown),
            )
        )

    def _ask(self, ask: Callable[[], Lessons]) -> Lessons | None:
        """Lessons help the model; they must never stop it: a failing source is logged and skipped."""
        try:
            return ask()
        except Exception:
            log.exception("reading lessons failed in session %s; going on without them", self.id)
            return None

    def show(self, shown: Lessons | None, moment: str, cause: str, call_id: str | None = None) -> None:
        if not shown or not shown.lessons:
            return
        if moment == "tool_result":
            self.shown.update(lesson.id for lesson in shown.lessons)
        self.emit(
            LessonsShown(
                session_id=self.id,
                cause_id=cause,
                moment=moment,
                call_id=call_id,  # type: ignore[arg-type]
                lessons=[lesson.to_dict() for lesson in shown.lessons],
                text=shown.text,
                tokens=shown.tokens,
            )
        )
