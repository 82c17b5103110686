"""State replay: the recorded moments of task sessions, sampled again and labelled by running each
sample on a scratch copy of the files as they were then.

A state is one recorded model call: the conversation and tool schemas the model was given (its
prompt tokens, as recorded for the embedded model), the task's sealed workspace with the session's
edits up to that call, and what the session's loop guards knew at that moment. A sample is one
more reply drawn there (seed k, the session's temperature, at most `cap` tokens); its label comes
from running its calls through the session's own call path (agent.call_path), unattended: the
schema check, the repeated-call and cycle guards against the recorded prefix, the approval policy
(an ask is declined, as in a headless run nobody answers), reads, listings and searches for real,
edits applied to the copy, commands with a short timeout, and a `finish` graded by the task's tests
(on the sealed files, where they fail by construction, premature without running them). Edits are
replayed; what a recorded command changed on disk is not.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agent.call_path import Unattended
from agent.config import REPLY_TOKENS
from agent.loop_guard import call_key
from agent.protocol import CALL_ERRORS, FAILING_COMMAND, SCHEMA_ERRORS, event_from_dict, is_call_error
from agent.protocol.arguments import read_arguments
from agent.toolkit import ToolResult

DEFAULT_CAP = REPLY_TOKENS  # tokens per sampled reply; a reply cut here is flagged cut_off
COMMAND_TIMEOUT = 20.0  # seconds for a sampled command (the session's own limit is longer)
# Labels that are not call errors: a finished or continuing reply, an answer without a call, a
# command that ran and failed (tests failing), `finish` while the tests fail.
OK, FINISHED, PREMATURE, ANSWER, FAILING_TEST = "ok", "finished", "premature_finish", "answer", "failing_test"
# The built-in tools that delete a file: such a call is never a verified success at a state (what it
# removed is not checked until the attempt ends), and an adapter that reaches for one more is refused.
DELETES = frozenset({"delete_file"})
# A call error only a replay names: a command the shell could not run at all (exit status 126 or
# 127: not found, not executable); the session records it as a failing command.
CANNOT_RUN = "cannot_run"


class StateError(Exception):
    """A state database or task file that cannot be replayed; the message says what to give instead."""


@dataclass(frozen=True)
class Label:
    """What one reply did at its state, as the session would record it. `kind` is a call-error kind,
    or ok / finished / premature_finish / answer / failing_test. `cut_off`: the reply reached the
    cap before it made a whole call (then a malformed call, or an answer when it began none)."""

    kind: str
    tools: tuple[str, ...] = ()
    cut_off: bool = field(default=False, compare=False)  # not something the session records
    # (tool, error kind, target) of each call error, as the session's pairs would key them
    failures: tuple[tuple[str, str, str | None], ...] = field(default=(), compare=False)

    @property
    def call_error(self) -> bool:
        return self.kind in CALL_ERRORS or self.kind == CANNOT_RUN


@dataclass
class State:
    session_id: str
    step: int
    task_id: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    config: dict[str, Any]
    reply: dict[str, Any]  # the recorded reply
    prompt_ids: list[int] | None
    reply_ids: list[int] | None
    calls: list[Label]  # what the session recorded for each call of the reply
    edits: list[dict[str, Any]]  # EditApplied events before this call
    previous_step: dict[tuple[str, str], int]  # the previous step's calls -> edits before each
    turn_calls: list[tuple[tuple[str, str] | None, bool, int]]  # this turn's calls: key, failed, edits before
    edit_count: int = 0

    @property
    def cluster(self) -> str:
        return self.task_id

    @property
    def recorded(self) -> Label:
        return reply_label(self.calls)


# ---------------------------------------------------------------------------------------------
# States from a database


def load_states(db: Path, *, max_per_session: int | None = None) -> list[State]:
    """Every recorded model call of the database's task sessions (the grader's own call aside),
    in session order. Sessions that are not task attempts are left out: their files cannot be
    rebuilt."""
    from feedback_store import StoreError, open_store

    if not Path(db).is_file():
        raise StateError(f"{db} does not exist: give a feedback database with recorded task attempts")
    try:
        store = open_store(db)
    except StoreError as exc:
        raise StateError(str(exc)) from exc
    try:
        states: list[State] = []
        for session_id, task in store.task_sessions().items():
            found = list(_session_states(store.events(session_id), task))
            states += found[:max_per_session] if max_per_session else found
    finally:
        store.close()
    return states


def _session_states(log: list[dict[str, Any]], task: dict[str, Any]) -> Iterator[State]:
    events = [event_from_dict(e) for e in log]
    started = events[0]
    task_id = task["instance_id"]
    solved = task.get("reward") == 1.0  # the session's last finish was graded: its tests passed or not
    messages: list[dict[str, Any]] = [{"role": "system", "content": started.system_prompt}]
    edits: list[dict[str, Any]] = []
    previous: dict[tuple[str, str], int] = {}
    current: dict[tuple[str, str], int] = {}
    turn_calls: list[tuple[tuple[str, str] | None, bool, int]] = []
    pending: State | None = None
    keys: dict[str, tuple[tuple[str, str] | None, int]] = {}
    for event in events[1:]:
        kind = event.type
        if kind == "turn_started":
            messages.append(event.message)
            current, turn_calls = {}, []
        elif kind == "assistant_message":
            if pending is not None:
                yield pending
            previous, current = current, {}
            pending = State(
                session_id=started.session_id,
                step=event.step,
                task_id=task_id,
                messages=list(messages),
                tools=started.tools,
                config=started.config,
                reply=event.message,
                prompt_ids=None,
                reply_ids=None,
                calls=[],
                edits=list(edits),
                previous_step=dict(previous),
                turn_calls=list(turn_calls),
                edit_count=len(edits),
            )
            messages.append(event.message)
        elif kind == "model_usage" and pending is not None and pending.step == event.step:
            pending.prompt_ids, pending.reply_ids = event.prompt_token_ids, event.completion_token_ids
        elif kind == "tool_call_started":
            if event.call_id.startswith("grader_"):
                continue
            key = None if event.args is None else call_key(event.name, event.args)
            keys[event.call_id] = (key, len(edits))
        elif kind == "edit_applied":
            edits.append(event.to_dict())
        elif kind == "tool_call_finished":
            if event.call_id.startswith("grader_"):
                continue
            if event.message is not None:
                messages.append(event.message)
            key, before = keys.pop(event.call_id, (None, len(edits)))
            schema = event.error_kind in SCHEMA_ERRORS
            if key is not None and not schema:
                current[key] = before
            turn_calls.append((None if schema else key, not event.ok, before))
            if pending is not None and pending.step == event.step:
                this = _result_label(event.name, event.ok, event.error_kind, event.exit_code)
                if this.kind == FINISHED and not solved:
                    this = Label(PREMATURE, this.tools)
                pending.calls.append(this)
    if pending is not None:
        yield pending


def _result_label(
    name: str, ok: bool, error_kind: str | None, exit_code: int | None = None, target: str | None = None
) -> Label:
    tools = (name,) if name else ()  # a reply that could not be read as a call names no tool
    if ok:
        return Label(FINISHED if name == "finish" else OK, tools)
    if error_kind == FAILING_COMMAND and not is_call_error(error_kind, exit_code):
        return Label(FAILING_TEST, tools)  # it ran and failed: no call error
    kind = CANNOT_RUN if error_kind == FAILING_COMMAND else error_kind or "failed"
    return Label(kind, tools, failures=((name, error_kind or "failed", target),))


def reply_label(calls: list[Label]) -> Label:
    """A reply's label from its calls' labels, in order: its first call error, else a failing
    test, else how its `finish` ended, else ok; a reply with no call is an answer."""
    tools = tuple(tool for label in calls for tool in label.tools)
    failures = tuple(failure for label in calls for failure in label.failures)
    kinds = [label.kind for label in calls]
    first_error = next((label.kind for label in calls if label.call_error), None)
    for kind in (first_error, FAILING_TEST if FAILING_TEST in kinds else None):
        if kind is not None:
            return Label(kind, tools, failures=failures)
    ended = next((kind for kind in kinds if kind in (FINISHED, PREMATURE)), None)
    return Label(ended or (OK if calls else ANSWER), tools, failures=failures)


# ---------------------------------------------------------------------------------------------
# The files at a state


@dataclass
class Scratch:
    """The files of a state, built once (the sealed task workspace and the edits before it), and a
    fresh copy of them for each sample."""

    state: State
    task: Any
    task_file: Path
    root: Path = field(init=False)

    def __post_init__(self) -> None:
        from agent.workspace import FileChange, Workspace
        from tasks.seal import make_workspace

        self._dir = Path(tempfile.mkdtemp(prefix="teachback-state-"))
        self.root = make_workspace(self.task, self.task_file, self._dir / "state", tests=self.task.tests)
        space = Workspace(self.root)
        for edit in self.state.edits:
            space.write(
                FileChange(
                    path=edit["path"],
                    kind=edit["kind"],
                    before=edit["before"],
                    after=edit["after"],
                    new_path=edit.get("new_path"),
                )
            )

    def copy(self, name: str) -> Path:
        dest = self._dir / name / "workspace"  # the folder's name as in the attempt
        shutil.copytree(self.root, dest, symlinks=True)
        return dest

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Labelling one reply


async def label_reply(
    state: State, reply: Any, workspace: Path, task: Any, task_file: Path, cap: int | None = None
) -> Label:
    """Run `reply`'s calls at `state` on `workspace` (a scratch copy) through the session's own call
    path (agent.call_path), unattended, and say what it did. `reply` is an agent.model.ModelReply."""
    return (await _run_reply(state, reply, workspace, task, task_file, cap)).label


async def next_state(state: State, reply: Any, workspace: Path, task: Any, task_file: Path) -> State | None:
    """The state one step after `state` had `reply` succeed there, as a session would have recorded
    it (the reply and its calls' results in the conversation, its edits among the state's edits, the
    loop guards' memory moved on), or None when the reply did not succeed or ended the attempt. Its
    calls run on `workspace` (a scratch copy of `state`'s files)."""
    run = await _run_reply(state, reply, workspace, task, task_file)
    if run.label.kind != OK:
        return None
    messages = [*state.messages, reply.message]
    messages += [
        {"role": "tool", "tool_call_id": call.get("id"), "content": result.output}
        for call, result in zip(reply.tool_calls, run.results)
    ]
    edits = [*state.edits, *run.edits]
    return replace(
        state,
        step=state.step + 1,
        messages=messages,
        reply={},
        prompt_ids=None,
        reply_ids=None,
        calls=[],
        edits=edits,
        previous_step={key: before for key, _, before in run.turn_calls if key is not None},
        turn_calls=[*state.turn_calls, *run.turn_calls],
        edit_count=len(edits),
    )


@dataclass
class _Run:
    label: Label
    results: list[ToolResult]
    edits: list[dict[str, Any]]  # as the EditApplied events record them
    turn_calls: list[tuple[tuple[str, str] | None, bool, int]]  # key, failed, edits before


class _Collect(Unattended):
    """An unattended run that keeps the changes it wrote, as a session's EditApplied events hold them."""

    def __init__(self) -> None:
        self.edits: list[dict[str, Any]] = []

    def written(self, change: Any, broken: str | None) -> None:
        self.edits.append(
            {"path": change.path, "kind": change.kind, "before": change.before, "after": change.after}
            | ({"new_path": change.new_path} if change.new_path else {})
        )


async def _run_reply(
    state: State, reply: Any, workspace: Path, task: Any, task_file: Path, cap: int | None = None
) -> _Run:
    from agent.approval import ApprovalPolicy
    from agent.call_path import CallPath, prepare
    from agent.loop_guard import LoopGuard
    from agent.runtime import default_toolbox
    from agent.tools.context import ToolContext
    from agent.workspace import Workspace

    calls = reply.tool_calls
    cut = not calls and cap is not None and reply.completion_tokens >= cap  # stopped before a whole call
    if reply.format_error:  # recorded as a call of no tool (no name, no target)
        return _Run(Label("malformed_call", cut_off=cut, failures=(("", "malformed_call", None),)), [], [], [])
    if not calls:
        return _Run(Label(ANSWER, cut_off=cut), [], [], [])
    settings = recorded_settings(state.config).replace(command_timeout=COMMAND_TIMEOUT)
    toolbox = default_toolbox()
    context = ToolContext(workspace=Workspace(workspace), settings=settings)
    guard = LoopGuard.resumed(state.previous_step, state.turn_calls, state.edit_count)
    path = CallPath(context, ApprovalPolicy.from_settings(settings), guard)
    hooks = _Collect()
    found: list[Label] = []
    results: list[ToolResult] = []
    turn_calls: list[tuple[tuple[str, str] | None, bool, int]] = []
    sealed = not state.edits  # the copy holds the sealed files: a recorded command's changes are not replayed
    for call in calls:
        name = call["function"]["name"]
        prepared = prepare(toolbox, name, read_arguments(call["function"].get("arguments") or ""))
        before = state.edit_count + len(hooks.edits)
        result = await path.result(prepared, hooks)
        this = _result_label(name, result.ok, result.error_kind, result.exit_code, result.target)
        if this.kind == FINISHED:
            this = Label(_finish_label(task, task_file, workspace, sealed), this.tools)
        sealed = sealed and (isinstance(prepared, ToolResult) or prepared.tool.action in ("read", "finish"))
        found.append(this)
        results.append(result)
        unkeyed = isinstance(prepared, ToolResult) or result.error_kind in SCHEMA_ERRORS  # as a session keys it
        turn_calls.append((None if unkeyed else prepared.key, not result.ok, before))
        if name == "finish" and result.ok:
            break
    return _Run(reply_label(found), results, hooks.edits, turn_calls)


def _finish_label(task: Any, task_file: Path, workspace: Path, sealed: bool) -> str:
    """How a `finish` ends: graded by the task's tests. On the sealed files (no edit, no command
    since) the task's FAIL_TO_PASS tests fail by construction, so it is premature without running them."""
    from tasks.grade import grade

    if sealed and task.FAIL_TO_PASS:
        return PREMATURE
    return FINISHED if grade(task, task_file, workspace).reward == 1.0 else PREMATURE


# ---------------------------------------------------------------------------------------------
# Sampling


@dataclass(frozen=True)
class Sampler:
    """Draws replies at states with one model (`local/<model>@<adapter>`), the session's own tool
    mode, temperature and thread count, at most `cap` tokens each."""

    model: str
    cap: int = DEFAULT_CAP
    temperature: float | None = None  # None: the session's own
    threads: int | None = None  # None: the session's own (local_threads)

    async def sample(self, state: State, seed: int) -> Any:
        from agent.model import LiteLLMModel

        config = state.config
        temperature = self.temperature if self.temperature is not None else config.get("temperature")
        extra = {
            "seed": seed,
            "max_tokens": self.cap,
            "temperature": temperature,
            "n_threads": self.threads or config.get("local_threads") or None,
        }
        model = LiteLLMModel(
            self.model,
            tool_mode=config.get("tool_mode") or "auto",
            max_retries=0,
            extra={k: v for k, v in extra.items() if v is not None},
        )
        return await model.complete(state.messages, state.tools)


def recorded_settings(config: dict[str, Any]) -> Any:
    """The settings the session ran with (its deny rules among them), from its recorded config."""
    import dataclasses

    from agent.config import Settings

    names = {f.name for f in dataclasses.fields(Settings)}
    return Settings().replace(**{k: v for k, v in config.items() if k in names})


def replayable(state: State) -> bool:
    return state.prompt_ids is not None and state.task_id is not None


def recorded_cap(state: State) -> int:
    return int(state.config.get("max_tokens") or DEFAULT_CAP)


def recorded_sampler(state: State, model: str) -> Sampler:
    """The sampler that reproduces the session's own call at `state` (its seed, cap, temperature)."""
    return replace(Sampler(model), cap=recorded_cap(state))
