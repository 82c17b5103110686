"""One graded attempt at a task: a fresh sealed workspace, the agent headless in full-auto, then the
task's own tests.

The agent runs through the same session-opening path as `teachback run` (host.session), recorded in
the feedback store. The session carries the task in its config (`config.task`: instance id, attempt, and after
grading the reward and the pass fractions). The grader's test run is reported to the recorder as a
`run_command` call after the agent's last step, so a failing run after the agent's edits becomes a
`test` pair through the store's normal pair path, with the test output as its feedback. The model
never sees that call: it is not part of the conversation.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.config import Settings, load_settings
from agent.llm import MODEL_USAGE_ERRORS
from agent.protocol import (
    SCHEMA_ERRORS,
    EditApplied,
    ErrorEvent,
    Event,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    UserInput,
    is_call_error,
)
from tasks.records import TaskError

log = logging.getLogger(__name__)

# Commands no task attempt may run, whatever the configuration says: each fetches from the network
# (the monitor flags the attempt too). A task file narrows this further with its own deny rules.
TASK_DENY_COMMANDS = (
    "curl *",
    "*[ /;&|]curl *",
    "wget *",
    "*[ /;&|]wget *",
    "*pip install*",
    "*pip3 install*",
    "*pip download*",
    "*uv pip install*",
    "*uv add *",
    "*git clone*",
    "*git fetch*",
    "*git pull*",
    "*git submodule update*",
    "ssh *",
    "scp *",
)
GRADER_CALL_PREFIX = "grader_"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
FAILING_SHOWN = 20  # failing test ids named in the grader's feedback


@dataclass(frozen=True)
class AttemptSpec:
    """Everything one attempt needs; plain data, so it travels to a pool worker or a Ray task."""

    task: Any  # tasks.records.Task
    task_file: str
    attempt: int
    model: str
    db: str
    work_dir: str | None = None  # where sealed workspaces are made (default: the system temp dir)
    overrides: dict[str, Any] = field(default_factory=dict)  # settings: max_steps, max_time, ...
    grade_timeout: float | None = None
    keep_workspace: bool = False

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.task.instance_id, self.attempt, self.model)


def attempt_settings(workspace: Path, spec: AttemptSpec) -> Settings:
    """The user's settings for this workspace, headless: full-auto, nothing asked unless the spec
    names ask rules (and then declined: nobody answers), recorded to `spec.db`, with the task deny
    rules added to the configured ones. Lessons are off unless the
    spec turns them on, so an attempt measures the model, not what the store happens to hold. The
    sampling seed is the attempt's number (offset by a configured seed): attempts differ by their
    seed, and the same attempt samples the same replies again."""
    base = load_settings(workspace)
    deny = (*base.deny_commands, *TASK_DENY_COMMANDS, *task_deny_rules(spec.task))
    return base.replace(
        model=spec.model,
        deny_commands=deny,
        db=spec.db,
        record=True,
        **{
            "approval": "full-auto",
            "ask_commands": (),
            "lessons": False,
            "seed": (base.seed or 0) + spec.attempt,
            **spec.overrides,
        },
    )


def task_deny_rules(task: Any) -> tuple[str, ...]:
    """The commands a task record denies besides (its `deny_commands` key: shell-style globs on the
    command line, as in the `deny_commands` setting)."""
    rules = task.extra.get("deny_commands") or []
    if not isinstance(rules, list) or not all(isinstance(rule, str) for rule in rules):
        raise TaskError(f"task {task.instance_id}: deny_commands must be a list of command globs, got {rules!r}")
    return tuple(rules)


FINISH_TOOL = "finish"


class AttemptMetrics:
    """Counts what the bench reports, from the session's own events (the grader's call excluded):
    calls; call errors (agent.protocol.is_call_error), the malformed and the repeated ones among
    them; failing test runs (commands that ran and exited non-zero: not call errors); and whether
    the model called finish (premature once graded, if the tests still fail: tasks.bench)."""

    def __init__(self) -> None:
        self.tool_calls = self.call_errors = self.malformed_calls = self.repeated_errors = 0
        self.failing_test_runs = self.edits = 0
        self.finish_called = False
        self.finished: TurnFinished | None = None
        self.model_unusable: str | None = None  # the model cannot be used at all (name, key, set-up)
        self._errors_seen: set[tuple[str, str | None, str | None]] = set()

    def __call__(self, event: Event) -> None:
        if isinstance(event, TurnFinished):
            self.finished = event
        if isinstance(event, EditApplied):
            self.edits += 1
        if isinstance(event, ErrorEvent) and event.kind in MODEL_USAGE_ERRORS:
            self.model_unusable = event.message
        if not isinstance(event, ToolCallFinished) or event.error_kind == "interrupted":
            return
        self.tool_calls += 1
        if event.ok:
            self.finish_called |= event.name == FINISH_TOOL
            return
        if not is_call_error(event.error_kind, event.exit_code):
            self.failing_test_runs += 1
            return
        self.call_errors += 1
        if event.error_kind in SCHEMA_ERRORS:
            self.malformed_calls += 1
        kind = (event.name, event.error_kind, event.target)
        if kind in self._errors_seen:  # the same kind of error on the same tool and target again
            self.repeated_errors += 1
        self._errors_seen.add(kind)

    def as_dict(self) -> dict[str, Any]:
        done = self.finished
        return {
            "finish_reason": done.reason if done else "error",
            "steps": done.steps if done else 0,
            "prompt_tokens": done.prompt_tokens if done else 0,
            "completion_tokens": done.completion_tokens if done else 0,
            "cost_usd": done.cost_usd if done else 0.0,
            "tool_calls": self.tool_calls,
            "call_errors": self.call_errors,
            "call_error_rate": self.call_errors / self.tool_calls if self.tool_calls else 0.0,
            "malformed_calls": self.malformed_calls,
            "repeated_errors": self.repeated_errors,
            "failing_test_runs": self.failing_test_runs,
            "edits": self.edits,
            "finish_called": self.finish_called,
            **({"error": f"the model cannot be used: {self.model_unusable}"} if self.model_unusable else {}),
        }


def run_attempt(spec: AttemptSpec) -> dict[str, Any]:
    """Run one attempt and return its result record (a JSON object). A failure of the harness
    itself (the workspace, the database) is returned as a record with `error` set, never raised."""
    started = time.perf_counter()
    record: dict[str, Any] = {"instance_id": spec.task.instance_id, "attempt": spec.attempt, "model": spec.model}
    scratch: Path | None = None
    try:
        scratch = scratch_dir(spec)
        record.update(_attempt(spec, scratch / "workspace"))
    except Exception as exc:  # reported in the results file; the run goes on with the next attempt
        log.exception("attempt %s #%d failed", spec.task.instance_id, spec.attempt)
        record.update(reward=0.0, error=f"{type(exc).__name__}: {exc}")
    finally:
        if scratch is not None and spec.keep_workspace:
            record["workspace"] = str(scratch / "workspace")
        elif scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    record["wall_s"] = round(time.perf_counter() - started, 3)
    return record


def scratch_dir(spec: AttemptSpec) -> Path:
    """A new folder for the attempt's workspace, at the same path for the same task and attempt, so
    that what the model is shown (tool results, what commands print) is byte-identical from run to
    run. A name already taken (a parallel run, a kept workspace) gets a fresh random one instead."""
    base = Path(spec.work_dir or tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    name = f"teachback-{_UNSAFE.sub('_', spec.task.instance_id)[:80]}-{spec.attempt}"
    try:
        (base / name).mkdir(mode=0o700)  # never follows a planted link: an existing name fails
        return base / name
    except FileExistsError:
        log.info(
            "%s exists; attempt %d of %s runs under a fresh name", base / name, spec.attempt, spec.task.instance_id
        )
        return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=base))


def _attempt(spec: AttemptSpec, dest: Path) -> dict[str, Any]:
    from host.session import IfNoStore, open_recorded
    from tasks.grade import grade
    from tasks.seal import make_workspace

    workspace = make_workspace(spec.task, Path(spec.task_file), dest, tests=spec.task.tests)
    settings = attempt_settings(workspace, spec)
    problems: list[str] = []
    task_meta = {"instance_id": spec.task.instance_id, "attempt": spec.attempt, "repo": spec.task.repo}
    # The session's config carries the task from its start, so even an attempt killed midway says which
    # task it was. A database that cannot be opened fails the attempt: it counts only once recorded.
    hosted = open_recorded(
        workspace,
        settings,
        frontend="tasks",
        if_no_store=IfNoStore.REFUSE,
        warn=problems.append,
        config={"task": task_meta},
    )
    try:
        session_id, metrics, agent_s = _run_agent(hosted.session, spec.task.problem_statement)
        clock = time.perf_counter()
        timeout = {} if spec.grade_timeout is None else {"timeout": spec.grade_timeout}
        result = grade(spec.task, Path(spec.task_file), workspace, **timeout)
        grade_s = time.perf_counter() - clock
        for event in grader_events(session_id, spec.task, result, step=metrics.get("steps", 0) + 1):
            hosted.record(event)
        unrecorded = hosted.stop()
        outcome = {
            "reward": float(result.reward),
            "f2p_pass_fraction": result.f2p_pass_fraction,
            "p2p_pass_fraction": result.p2p_pass_fraction,
        }
        mark_session(hosted.store, session_id, {**task_meta, **outcome})
        flags = sorted({row["rule"] for row in hosted.store.flags(session_id)})
    finally:
        hosted.close()
    record = {
        "session_id": session_id,
        **outcome,
        "flags": flags,
        **metrics,
        "agent_s": round(agent_s, 3),
        "grade_s": round(grade_s, 3),
        "failing_tests": failing_tests(spec.task, result),
    }
    if unrecorded:  # the attempt counts only once the store holds all of it
        record["error"] = f"{len(unrecorded)} event(s) not recorded: {'; '.join(problems) or 'see the log'}"
    return record


def _run_agent(session: Any, instruction: str) -> tuple[str, dict[str, Any], float]:
    from agent.approval import NobodyAnswers

    metrics = AttemptMetrics()
    session.subscribe(metrics)
    NobodyAnswers(session)  # an ask rule the settings keep is declined, as state replay declines it
    clock = time.perf_counter()
    asyncio.run(session.run(UserInput(text=instruction)))
    return session.id, metrics.as_dict(), time.perf_counter() - clock


def task_command(task: Any) -> str:
    command = task.test_cmd
    return command if isinstance(command, str) else " ".join(str(part) for part in command)


def failing_tests(task: Any, result: Any) -> list[str]:
    """FAIL_TO_PASS tests still failing and PASS_TO_PASS tests broken, in task order."""
    outcomes = result.outcomes or {}
    wanted = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    return [test for test in wanted if outcomes.get(test) != "passed"]


def grader_events(session_id: str, task: Any, result: Any, *, step: int) -> tuple[Event, Event]:
    """The grader's run as a `run_command` call after the agent's last step (not in the conversation)."""
    from agent.tools import run_command

    command = task_command(task)
    call_id = f"{GRADER_CALL_PREFIX}{session_id}"
    roles = run_command.roles
    args = {roles.command: command}
    start = ToolCallStarted(
        session_id=session_id,
        call_id=call_id,
        name=run_command.name,
        arguments=json.dumps(args),
        step=step,
        target=roles.target_of(args),
        args=args,
        roles=roles.to_dict(),
    )
    code = grader_exit_code(result)
    return start, ToolCallFinished(
        session_id=session_id,
        cause_id=start.id,
        call_id=call_id,
        name=run_command.name,
        ok=code == 0,
        result=grader_feedback(command, task, result),
        step=step,
        error_kind=None if code == 0 else "exit_status",
        target=roles.target_of(args),
        exit_code=code,
        duration_ms=round(result.seconds * 1000, 1),
        message=None,
    )


def grader_exit_code(result: Any) -> int:
    """The status the grader's run reports: 0 when the task's tests all pass, else 1."""
    return 0 if result.reward >= 1 else 1


def grader_feedback(command: str, task: Any, result: Any) -> str:
    """What the task's tests said after the agent finished: counts, the failing tests, the output."""
    from agent.tools.commands import cap_output

    failing = failing_tests(task, result)
    f2p, p2p = len(task.FAIL_TO_PASS), len(task.PASS_TO_PASS)
    head = (
        f"The task's tests, run after you finished (with the original test files): "
        f"{round(result.f2p_pass_fraction * f2p)} of {f2p} tests that had to start passing pass, "
        f"{round(result.p2p_pass_fraction * p2p)} of {p2p} tests that passed before still pass."
    )
    if failing:
        more = f" (and {len(failing) - FAILING_SHOWN} more)" if len(failing) > FAILING_SHOWN else ""
        head += "\nFailing: " + ", ".join(failing[:FAILING_SHOWN]) + more
    return f"{head}\n$ {command}\n[exit code {grader_exit_code(result)}]\n{cap_output(result.output or '')}"


def mark_session(store: Any, session_id: str, task_meta: dict[str, Any]) -> None:
    """Set the session's `config.task` (instance id, attempt, reward, pass fractions)."""
    store.mark_task(session_id, task_meta)
