"""The one protocol between frontends and a session: Ops in, Events out.

Every frontend (language server, terminal app, CLI) only sends Ops and reads Events; the feedback
store is one more Event subscriber. Each Event has an id, the session id, a timestamp and the id of
what caused it, and serialises to JSON and back losslessly: a session's event log is enough to
rebuild every message the model saw (see `conversation_from_events`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, get_args

from agent.protocol.arguments import read_arguments
from agent.protocol.roles import Roles, roles_for

# 2: the user's verdicts (review, correction, undo) are Ops, and an undo is recorded as TurnUndone.
PROTOCOL_VERSION = 2
# Half of a UTF-16 pair on its own: JSON's \udXXX escapes let a model send one, but it is not a
# Unicode character, so no file, UTF-8 stream or SQLite text can hold it.
LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def new_id() -> str:
    """A sortable unique id: time-ordered UUIDv7-like hex (48 bits of ms, 80 random bits)."""
    ms = int(time.time() * 1000)
    return f"{ms:012x}{uuid.uuid4().hex[:20]}"


# ---------------------------------------------------------------------------------------------
# Ops: what a frontend sends to a session


@dataclass(frozen=True, kw_only=True)
class ContextRef:
    """A file (optionally a line range, 1-based inclusive) the user points the agent at."""

    path: str
    start_line: int | None = None
    end_line: int | None = None
    note: str | None = None  # e.g. diagnostics the editor shows for this range

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set, as TurnStarted records them."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclass(frozen=True, kw_only=True)
class Op:
    id: str = field(default_factory=new_id)
    type: ClassVar[str] = "op"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **dataclasses.asdict(self)}


@dataclass(frozen=True, kw_only=True)
class UserInput(Op):
    text: str
    context: tuple[ContextRef, ...] = ()
    type: ClassVar[str] = "user_input"


@dataclass(frozen=True, kw_only=True)
class ApprovalDecision(Op):
    request_id: str
    approved: bool
    comment: str | None = None
    type: ClassVar[str] = "approval_decision"


@dataclass(frozen=True, kw_only=True)
class Interrupt(Op):
    type: ClassVar[str] = "interrupt"


@dataclass(frozen=True, kw_only=True)
class ReviewEdit(Op):
    """Accept or reject one edit the last turn applied; rejecting restores the file as it was
    before it. Answered by an EditReviewed."""

    edit_id: str
    accepted: bool
    comment: str | None = None
    type: ClassVar[str] = "review_edit"


@dataclass(frozen=True, kw_only=True)
class ReviewFile(Op):
    """Accept or reject everything the last turn did to a file; rejecting restores it. Answered by
    an EditReviewed."""

    path: str
    accepted: bool
    comment: str | None = None
    type: ClassVar[str] = "review_file"


@dataclass(frozen=True, kw_only=True)
class CorrectEdit(Op):
    """The user's own version of a file the agent edited, to record as a correction. Answered by an
    EditReviewed, or by nothing when it is the agent's version."""

    path: str
    user_content: str
    type: ClassVar[str] = "correct_edit"


@dataclass(frozen=True, kw_only=True)
class Undo(Op):
    """Restore the working tree to the last checkpoint. Answered by a TurnUndone."""

    type: ClassVar[str] = "undo"


@dataclass(frozen=True, kw_only=True)
class SetMode(Op):
    """Switch the approval mode (agent.config.APPROVAL_MODES) from the next call on; leaving plan mode
    while a plan waits approves it. Answered by a ModeChanged."""

    mode: str
    type: ClassVar[str] = "set_mode"


@dataclass(frozen=True, kw_only=True)
class ReviewPlan(Op):
    """The user's verdict on the plan waiting for review: approved, the session switches to `mode`
    and implements it; sent back, `comment` is the reason and it plans again. Answered by the
    TurnFinished of the turn that follows."""

    approved: bool
    comment: str | None = None
    mode: str = "auto-edit"
    type: ClassVar[str] = "review_plan"


# ---------------------------------------------------------------------------------------------
# Events: what a session tells its subscribers

FinishReason = Literal[
    "finished",  # the model called `finish`
    "answered",  # the model replied without a tool call
    "max_steps",
    "max_cost",
    "max_time",
    "max_tokens",  # the model's reply (text, no call) was cut at its token limit
    "refusal",  # the model, or its provider's content filter, declined to answer
    "interrupted",
    "stuck",  # the model kept re-sending the same call (or cycle of calls) after being told it changes nothing
    "error",  # the model could not be reached or failed for good
    "blocked",  # a hook blocked the prompt, or stopped the turn (`continue: false`)
]

ErrorKind = Literal[
    "unknown_tool",
    "malformed_json",
    "bad_arguments",
    "malformed_call",  # text tool-call mode: a reply that could not be parsed into a call
    "repeated_call",  # the same call as the previous step, with nothing changed since
    "repeated_cycle",  # a call closing a short cycle (2-4 calls) of failures, with nothing changed since
    "denied",  # the approval policy or the user refused
    "interrupted",  # the user interrupted the turn before this call ran, or stopped its command in the editor
    "not_found",
    "no_match",
    "ambiguous",
    "outside_workspace",
    "binary",
    "too_large",
    "encoding",
    "exists",
    "timeout",
    "exit_status",  # a command ran and exited non-zero
    "crashed",  # an MCP tool's server exited or dropped the connection during the call
    "unavailable",  # an MCP tool's server could not be started, or the editor's terminal failed a command
    "failed",  # any other execution error (an MCP tool's own error result, isError, included)
]

# What counts as a mistake. A call error is a call that failed because of the call itself (a wrong
# path or text, bad arguments, an unknown tool, a repeat, a refusal, a command that cannot run, a
# file too large or binary): every figure of call errors (bench, eval, stats, the terminal app) and
# every tool or schema feedback pair comes from these. Not call errors: a command that ran and
# exited non-zero (a failing test run: expected while a task's feature is missing), a call the user
# interrupted before it ran (or whose command the user stopped), and a call to an MCP server that could
# not be started or a command the editor's terminal failed (the set-up's fault, not the call's).
FAILING_COMMAND = "exit_status"
# What the model sent could not be a call to a tool: its form was wrong, not its aim.
SCHEMA_ERRORS = frozenset({"unknown_tool", "malformed_json", "bad_arguments", "malformed_call"})
# A call answered with feedback instead of being run: it would repeat a failure with nothing changed.
REPEAT_ERRORS = frozenset({"repeated_call", "repeated_cycle"})
NOT_CALL_ERRORS = frozenset({FAILING_COMMAND, "interrupted", "unavailable"})
CALL_ERRORS = frozenset(get_args(ErrorKind)) - NOT_CALL_ERRORS
# A shell's exit status for a command it could not run at all (126: not executable, 127: not found):
# reported as exit_status, but a mistake in the call.
NOT_RUNNABLE_EXIT_CODES = frozenset({126, 127})


# Tools from MCP servers are named mcp__<server>__<tool> (agent/mcp); teachback knows nothing of what
# their arguments mean beyond their schema.
MCP_PREFIX = "mcp__"


# The declared action (agent.toolkit.Action) of the tool that ends a turn: its summary is the turn's answer.
ENDS_TURN = "finish"


def is_mcp_tool(name: str | None) -> bool:
    return name is not None and name.startswith(MCP_PREFIX)


def is_call_error(error_kind: str | None, exit_code: int | None = None) -> bool:
    """Whether a call that ended with `error_kind` (and, for a command, `exit_code`) is a call error."""
    if error_kind == FAILING_COMMAND:
        return exit_code in NOT_RUNNABLE_EXIT_CODES
    return error_kind in CALL_ERRORS


@dataclass(frozen=True, kw_only=True)
class Event:
    session_id: str
    id: str = field(default_factory=new_id)
    ts: float = field(default_factory=time.time)
    cause_id: str | None = None
    type: ClassVar[str] = "event"

    def to_dict(self) -> dict[str, Any]:
        # Event fields hold JSON values only (str, numbers, bool, None, lists, dicts), so a shallow
        # copy is already plain data: the recorder and the JSON-lines output call this per event. The
        # instance dict of a frozen dataclass holds its fields, in their order, and nothing else.
        return {"type": self.type, **self.__dict__}

    def to_json(self) -> str:
        """One line of JSON that is valid UTF-8: a lone surrogate the model sent is written as its
        `\\udXXX` escape (the other characters as themselves)."""
        text = json.dumps(self.to_dict(), ensure_ascii=False, sort_keys=True)
        if not text.isascii() and LONE_SURROGATE.search(text):
            return json.dumps(self.to_dict(), ensure_ascii=True, sort_keys=True)
        return text


def _without_none(found: dict[str, Any], *names: str) -> dict[str, Any]:
    """An event's fields less those of `names` that are unset: fields added later stay out of the
    rows of events that lack them, so what is stored for those is as it was."""
    for name in names:
        if found.get(name) is None:
            found.pop(name, None)
    return found


@dataclass(frozen=True, kw_only=True)
class SessionStarted(Event):
    workspace: str
    model: str
    frontend: str
    system_prompt: str
    tools: list[dict[str, Any]]  # OpenAI function schemas, exactly as sent to the model
    git_head: str | None = None
    repository: str | None = None  # the repository's identity (its root commit), whatever its path
    config: dict[str, Any] = field(default_factory=dict)
    protocol_version: int = PROTOCOL_VERSION
    type: ClassVar[str] = "session_started"


@dataclass(frozen=True, kw_only=True)
class TurnStarted(Event):
    turn: int
    text: str
    message: dict[str, Any]  # the user message appended to the conversation, as sent
    context: list[dict[str, Any]] = field(default_factory=list)
    type: ClassVar[str] = "turn_started"


@dataclass(frozen=True, kw_only=True)
class AssistantDelta(Event):
    text: str
    type: ClassVar[str] = "assistant_delta"


@dataclass(frozen=True, kw_only=True)
class AssistantMessage(Event):
    step: int
    message: dict[str, Any]  # the assistant message appended to the conversation, as sent
    # The text and grammar tool modes, where the message's content is the model's raw reply: the
    # reply's words without the calls written in it ("" when it is only calls). None: the content is
    # the words (native tool calls).
    text: str | None = None
    type: ClassVar[str] = "assistant_message"

    def to_dict(self) -> dict[str, Any]:
        # Stored rows stay as they were for native replies (older readers and merges read them).
        found = super().to_dict()
        if found["text"] is None:
            del found["text"]
        return found


@dataclass(frozen=True, kw_only=True)
class ModelUsage(Event):
    """One model call: what it cost, how long it took, and the sampled tokens' logprobs."""

    model: str
    step: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_ms: float
    attempts: int = 1
    logprobs: list[dict[str, Any]] | None = None  # [{"token": str, "logprob": float}, ...]
    # What the model was given when it differs from the conversation (text and grammar tool modes):
    tool_mode: str | None = None  # native | text | grammar
    rendered_messages: list[dict[str, Any]] | None = None  # the messages as sent to the provider
    # The embedded model only: the token ids it was fed and those it sampled (aligned with logprobs).
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    type: ClassVar[str] = "model_usage"

    @classmethod
    def from_reply(cls, reply: Any, *, session_id: str, cause_id: str, model: str, step: int) -> ModelUsage:
        """The usage of one model reply (an agent.model.ModelReply, read by the names of this event's
        own fields: the protocol imports nothing of the agent's)."""
        given = {"session_id", "id", "ts", "cause_id", "model", "step"}
        measured = {name: getattr(reply, name) for name in _field_names(cls) if name not in given}
        return cls(session_id=session_id, cause_id=cause_id, model=model, step=step, **measured)


@dataclass(frozen=True, kw_only=True)
class ToolCallStarted(Event):
    """A call about to run. `arguments` is the raw text the model sent; `args` is that text read
    once, within bounds (agent.protocol.arguments), or None with `args_error` saying why: readers
    use `args`, never a parser on `arguments`. Built without either, the event reads the text itself.
    `roles` are what the tool declares its arguments mean (agent.protocol.roles); built without
    them (an event recorded before calls carried them), the event has its built-in tool's. `shown`
    is how the call reads to a person, from what the tool declares (agent.toolkit.Shown): its
    `action` (read, edit, command, call, finish), `kind`, `title` and `line`; None for a call of no
    tool, and in an event recorded before calls carried it."""

    call_id: str
    name: str
    arguments: str  # the raw argument text the model sent
    step: int
    target: str | None = None  # the value of the tool's target argument (None: none sent, or unreadable)
    args: dict[str, Any] | None = None
    args_error: str | None = None
    roles: dict[str, Any] | None = None  # Roles.to_dict()
    shown: dict[str, Any] | None = None
    type: ClassVar[str] = "tool_call_started"

    def __post_init__(self) -> None:
        if self.args is None and self.args_error is None:
            read = read_arguments(self.arguments)
            object.__setattr__(self, "args", read.value)
            object.__setattr__(self, "args_error", read.problem)
        if self.roles is None:
            object.__setattr__(self, "roles", roles_for(self.name).to_dict())

    @property
    def call_roles(self) -> Roles:
        return roles_for(self.name, self.roles)

    def to_dict(self) -> dict[str, Any]:
        return _without_none(super().to_dict(), "shown")


@dataclass(frozen=True, kw_only=True)
class ToolCallFinished(Event):
    """A call's end. `roles` are its tool's (as its ToolCallStarted carries them; None for a call
    that never started, and in an event recorded before the end carried them)."""

    call_id: str
    name: str
    ok: bool
    result: str  # the text sent back to the model
    step: int
    error_kind: ErrorKind | None = None
    target: str | None = None  # the path (or command) the call acted on
    exit_code: int | None = None  # run_command's exit status (None for other tools, or a command that did not end)
    duration_ms: float = 0.0
    message: dict[str, Any] | None = None  # the message appended to the conversation, as sent
    roles: dict[str, Any] | None = None  # Roles.to_dict()
    type: ClassVar[str] = "tool_call_finished"

    def to_dict(self) -> dict[str, Any]:
        return _without_none(super().to_dict(), "roles")

    @classmethod
    def from_result(cls, result: Any, **call: Any) -> ToolCallFinished:
        """The end of a call from its tool's result (an agent.toolkit.ToolResult, read by its field
        names: the protocol imports nothing of the agent's); `call` names the call and its step."""
        return cls(
            ok=result.ok,
            result=result.output,
            error_kind=result.error_kind,
            target=result.target,
            exit_code=result.exit_code,
            **call,
        )


@dataclass(frozen=True, kw_only=True)
class EditApplied(Event):
    edit_id: str
    call_id: str
    path: str
    kind: Literal["create", "modify", "delete", "move"]
    before: str | None
    after: str | None
    diff: str
    new_path: str | None = None
    syntax_error: str | None = None  # set when the edited file no longer parses
    type: ClassVar[str] = "edit_applied"


@dataclass(frozen=True, kw_only=True)
class ApprovalRequested(Event):
    request_id: str
    call_id: str
    action: Literal["edit", "command", "call"]  # call: a tool from an MCP server
    summary: str
    detail: str  # the diff, the command line, or an MCP call's arguments
    type: ClassVar[str] = "approval_requested"


@dataclass(frozen=True, kw_only=True)
class ApprovalResolved(Event):
    request_id: str
    call_id: str
    approved: bool
    comment: str | None = None
    type: ClassVar[str] = "approval_resolved"


@dataclass(frozen=True, kw_only=True)
class EditReviewed(Event):
    """The user's verdict on an applied edit, after the fact (diff review, editor reject/accept).

    `user_content` is the file as the user left it when they corrected the agent's version by hand
    (or the restored content on rejection); the store turns rejections and corrections into `user`
    feedback pairs.
    """

    edit_id: str
    path: str
    decision: Literal["accepted", "rejected", "corrected"]
    comment: str | None = None
    user_content: str | None = None
    type: ClassVar[str] = "edit_reviewed"


@dataclass(frozen=True, kw_only=True)
class TurnUndone(Event):
    """The user undid the last turn: the working tree is back at its checkpoint (agent.checkpoint).
    `paths` are the files restored; an undo refused (nothing to undo) is not an event."""

    paths: list[str]
    type: ClassVar[str] = "turn_undone"


@dataclass(frozen=True, kw_only=True)
class ModeChanged(Event):
    """The approval mode changed (a SetMode, or an approved plan's chosen mode)."""

    mode: str
    previous: str
    type: ClassVar[str] = "mode_changed"


@dataclass(frozen=True, kw_only=True)
class PlanProposed(Event):
    """A plan-mode turn ended with a plan (its final answer), waiting for the user's ReviewPlan.
    `message_id` is the AssistantMessage that holds it."""

    plan: str
    turn: int
    message_id: str | None = None
    type: ClassVar[str] = "plan_proposed"


@dataclass(frozen=True, kw_only=True)
class PlanReviewed(Event):
    """The user's verdict on the plan `plan_id`: approved (the session goes on in `mode`), or sent
    back with `comment` as the reason (recorded as a `user` feedback pair)."""

    plan_id: str
    approved: bool
    mode: str
    comment: str | None = None
    type: ClassVar[str] = "plan_reviewed"


@dataclass(frozen=True, kw_only=True)
class TurnFinished(Event):
    turn: int
    reason: FinishReason
    summary: str = ""
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    type: ClassVar[str] = "turn_finished"


@dataclass(frozen=True)
class Lesson:
    """One thing learned from earlier sessions (or pinned by a person), as the model is shown it."""

    id: str
    text: str  # the line the model reads
    origin: str  # distilled (from recorded failures and their fixes) | user (pinned by a person)
    scope: str  # where it came from: workspace | user (the rest of the user's store) | team
    pinned: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Lessons:
    """Lessons rendered for the model: `text` is exactly what is appended ('' when there are none)."""

    text: str = ""
    lessons: tuple[Lesson, ...] = ()
    tokens: int = 0  # estimated


@dataclass(frozen=True, kw_only=True)
class LessonsShown(Event):
    """Lessons from earlier sessions the model was shown: at session start (appended to the system
    prompt) or after a failing tool call (appended to that call's tool message, whose `result`
    stays the tool's own text). `text` is exactly what was appended."""

    moment: Literal["session_start", "tool_result"]
    lessons: list[dict[str, Any]]  # [{"id", "text", "origin", "scope", "pinned"}, ...]
    text: str
    tokens: int = 0  # estimated
    call_id: str | None = None  # the failing call, for tool_result
    type: ClassVar[str] = "lessons_shown"


@dataclass(frozen=True, kw_only=True)
class HookRan(Event):
    """A hook ran for one of the session's events (agent.hooks): a command hook from the user's or the
    workspace's configuration, or a built-in one (the lessons guard). `updated_input` is a call as a
    hook rewrote it (the call as sent is its ToolCallStarted's `arguments`). `message` is what the
    event's hooks put into the conversation (a Stop hook's reason, sent to the model as a user
    message): carried by the one HookRan that sums up those hooks, with `hook` naming the event."""

    hook_event: str  # SessionStart, UserPromptSubmit, PreToolUse, PermissionRequest, PostToolUse, ...
    hook: str  # the command line, or the built-in hook's name
    source: str  # the file that defined it, or "built-in"
    call_id: str | None = None
    decision: str | None = None  # allow | deny | ask | block
    reason: str = ""
    updated_input: dict[str, Any] | None = None
    context: str = ""
    exit_code: int | None = None
    duration_ms: float = 0.0
    problem: str | None = None  # it crashed, hung or printed what cannot be read
    message: dict[str, Any] | None = None
    type: ClassVar[str] = "hook_ran"


@dataclass(frozen=True, kw_only=True)
class ErrorEvent(Event):
    message: str
    kind: str = "error"
    type: ClassVar[str] = "error"


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type: cls
    for cls in (
        SessionStarted,
        TurnStarted,
        AssistantDelta,
        AssistantMessage,
        ModelUsage,
        ToolCallStarted,
        ToolCallFinished,
        EditApplied,
        ApprovalRequested,
        ApprovalResolved,
        EditReviewed,
        TurnUndone,
        TurnFinished,
        ErrorEvent,
        LessonsShown,
        HookRan,
        ModeChanged,
        PlanProposed,
        PlanReviewed,
    )
}


def event_from_dict(data: dict[str, Any]) -> Event:
    data = dict(data)
    kind = data.pop("type", None)
    cls = EVENT_TYPES.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise ValueError(f"unknown event type {kind!r}; known: {', '.join(sorted(EVENT_TYPES))}")
    return cls(**data)


def event_from_json(text: str) -> Event:
    return event_from_dict(json.loads(text))


OP_TYPES: dict[str, type[Op]] = {
    cls.type: cls
    for cls in (UserInput, ApprovalDecision, Interrupt, ReviewEdit, ReviewFile, CorrectEdit, Undo, SetMode, ReviewPlan)
}


def op_from_dict(data: dict[str, Any]) -> Op:
    """The inverse of `Op.to_dict` (a UserInput's context refs come back as ContextRefs)."""
    data = dict(data)
    kind = data.pop("type", None)
    cls = OP_TYPES.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise ValueError(f"unknown op type {kind!r}; known: {', '.join(sorted(OP_TYPES))}")
    if cls is UserInput:
        data["context"] = tuple(ContextRef(**ref) for ref in data.get("context", ()))
    return cls(**data)


def conversation_from_events(events: list[Event]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rebuild (messages, tools) exactly as the model last saw them from a session's event log."""
    messages: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    for event in events:
        if isinstance(event, SessionStarted):
            messages = [{"role": "system", "content": event.system_prompt}]
            tools = event.tools
        elif isinstance(event, (TurnStarted, AssistantMessage)):
            messages.append(event.message)
        elif isinstance(event, (ToolCallFinished, HookRan)) and event.message is not None:
            messages.append(event.message)
    return messages, tools


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))
