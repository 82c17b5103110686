"""Corrections that fit their prompt: a replacement for the failed turn that is valid at the same
prefix, for the formats that train on it (dpo `chosen`, sft and kto completions, trl-sdft's
demonstration).

A correction is always a call that succeeded when it was made (the recorder links no other, and
a fix recorded before that rule whose call failed is refused here), or, for a plan the user sent
back, the next plan: a reply without a call, valid at the same prefix since plan mode changed nothing. It is the assistant message
that made it, as the model wrote it (its own text, its own argument formatting), whenever that call
applies unchanged at the failure's prefix: a call that reads, lists or runs, and an edit of a file
no other edit touched in between.

The recorded correction was written later, after the failure and its feedback: an edit in it may
rely on text that exists only after the failed edit was applied. So such a correction is re-derived
as the net change from the file as it was at the failure's prefix to the file as the fix left it,
written as one call (`edit_file` with an `old_text` found exactly once in the prefix's file, or
`create_file` when the file did not exist yet), and marked `derived` (the exporters write it as the
session's model writes calls). A fix that changed other files too, or a file whose state at the
prefix was never recorded, has no single-call replacement: the pair is left out of those formats,
with the reason counted in the export's report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.protocol import REPEAT_ERRORS, SCHEMA_ERRORS, is_mcp_tool
from agent.protocol.roles import roles_for
from feedback_store.export.views import canonical_call, tool_names
from feedback_store.rows import FIX_WINDOW, MCP_FAILURES, SENT_BACK, WRONG_TARGET, Pair
from feedback_store.store import Store

Message = dict[str, Any]
EDIT_TOOLS = ("edit_file", "create_file")  # the tools a net change is written with


@dataclass(frozen=True)
class Fit:
    """A replacement for a failed turn: an assistant message with one call (its content the
    model's own text, its call's arguments parsed), or None and why there is none."""

    message: Message | None
    reason: str | None = None  # why there is none
    derived: bool = False  # composed from the net change of a file, not a call the model made
    seq: int | None = None  # the recorded assistant message it is, when it is that whole reply


@dataclass(frozen=True)
class _Edit:
    seq: int
    ts: float
    call_id: str | None
    path: str
    new_path: str | None
    kind: str
    before: str | None
    after: str | None

    def touches(self, path: str) -> bool:
        return path in (self.path, self.new_path)

    def state_after(self, path: str) -> str | None:
        return None if self.kind == "move" and self.path == path else self.after


class Workspace:
    """The recorded file states of a store's sessions, one session at a time."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.session: str | None = None
        self.edits: list[_Edit] = []

    def _load(self, session_id: str) -> None:
        if session_id == self.session:
            return
        self.session = session_id
        rows = self.store.query(
            """
            SELECT e.message_seq AS seq, e.ts, e.call_id, e.path, e.new_path, e.kind, b.content AS before, a.content AS after
            FROM edits e LEFT JOIN blobs b ON b.hash = e.before_hash LEFT JOIN blobs a ON a.hash = e.after_hash
            WHERE e.session_id = ? AND e.message_seq IS NOT NULL ORDER BY e.message_seq, e.ts, e.rowid
            """,
            (session_id,),
        )
        self.edits = [_Edit(**row) for row in rows]

    def state_at_prefix(self, session_id: str, path: str, seq: int) -> tuple[bool, str | None]:
        """(known, content) of `path` just before message `seq`; content None: no such file."""
        self._load(session_id)
        earlier = [e for e in self.edits if e.seq < seq and e.touches(path)]
        if earlier:
            return True, earlier[-1].state_after(path)
        later = [e for e in self.edits if e.seq >= seq and e.touches(path)]
        if later:
            return True, later[0].before if later[0].path == path else None
        return False, None

    def state_at(self, session_id: str, path: str, ts: float) -> str | None:
        self._load(session_id)
        done = [e for e in self.edits if e.ts <= ts and e.touches(path)]
        return done[-1].state_after(path) if done else None

    def changed_between(self, session_id: str, seq: int, ts: float) -> set[str]:
        self._load(session_id)
        return {p for e in self.edits if e.seq >= seq and e.ts <= ts for p in (e.path, e.new_path) if p}

    def unchanged_for(self, session_id: str, call_id: str | None, path: str, seq: int, ts: float) -> bool:
        """Whether `path` was edited from message `seq` up to time `ts` by the call `call_id` alone:
        then that call found the file as it was at the prefix."""
        self._load(session_id)
        return all(e.call_id == call_id for e in self.edits if e.seq >= seq and e.ts <= ts and e.touches(path))

    def absent_at_prefix(self, session_id: str, path: str, seq: int) -> bool:
        known, content = self.state_at_prefix(session_id, path, seq)
        return known and content is None

    def paths_edited_by(self, session_id: str, seq: int) -> list[str]:
        """The files the assistant message `seq` changed."""
        self._load(session_id)
        return sorted({e.new_path or e.path for e in self.edits if e.seq == seq})


def fitting_correction(ws: Workspace, pair: Pair, canonical: Callable[[Message], Message] | None = None) -> Fit:
    """A replacement for `pair`'s failed turn that is valid at its prefix, or why there is none.
    `canonical`: a message's canonical form as the caller keeps it (views.canonical_message), so
    the fixing call's arguments are not read a second time."""
    if pair.correction is None:
        return Fit(None, _uncorrected(pair))
    seq = len(pair.prompt)
    if pair.source == "user" and pair.error_kind == "corrected":  # the user's version of the file is the fix
        return _net_change(ws, pair, pair.target or "", seq, None, pair.correction.get("content") or "")
    if pair.error_kind == SENT_BACK and not pair.correction.get("tool_calls"):  # the next plan: a reply, no call
        return Fit(
            {"role": "assistant", "content": pair.correction.get("content") or ""},
            seq=pair.fix.seq if pair.fix else None,
        )
    fix = pair.fix
    if fix is None:
        return Fit(None, "fix not recorded")
    if not fix.succeeded:
        return Fit(None, "the fixing call failed")  # linked by a recorder from before corrections had to succeed
    call_id = fix.call_id
    if pair.source in ("lint", "test"):
        paths = ws.paths_edited_by(pair.session_id, seq) if pair.source == "test" else [pair.target or ""]
        if len(paths) != 1:
            return Fit(None, "failed reply edited several files")
        return _net_change(ws, pair, paths[0], seq, fix.at, None, call_id if pair.source == "lint" else None)
    calls = pair.correction.get("tool_calls") or []
    index = next((i for i, c in enumerate(calls) if c.get("id") == call_id), None)
    if index is None:
        return Fit(None, "fixing call not found")
    call = calls[index]
    made = _made(pair.correction, index, canonical)  # its arguments parsed once, for the checks and the record
    arguments = made["function"]["arguments"]
    arguments = arguments if isinstance(arguments, dict) else None
    name = call["function"].get("name")
    roles = roles_for(name, fix.roles)
    target = roles.target_of(arguments) if roles.target_is_path else None
    if name in EDIT_TOOLS and target is not None:
        if not ws.unchanged_for(pair.session_id, call_id, target, seq, fix.at):
            return _net_change(ws, pair, target, seq, fix.at, None, call_id)
    # the files the call needs to exist: those it reads, and the one it acts on (a move's destination must not)
    paths = [*roles.paths_read(arguments), *([target] if target is not None else [])]
    if name not in EDIT_TOOLS and any(ws.absent_at_prefix(pair.session_id, p, seq) for p in paths):
        return Fit(None, "fix uses a file created later")
    whole = len(pair.correction.get("tool_calls") or []) == 1
    return Fit(_as_made(pair.correction, made), seq=fix.seq if whole else None)


def _made(message: Message, index: int, canonical: Callable[[Message], Message] | None) -> dict[str, Any]:
    """The message's call `index` in its canonical form (the canonical form of an assistant
    message holds each of its calls so)."""
    if canonical is not None and message.get("role") == "assistant":
        return canonical(message)["tool_calls"][index]
    return canonical_call(message["tool_calls"][index])


def _uncorrected(pair: Pair) -> str:
    """Why a pair has no correction, as the export reports it."""
    if pair.error_kind in SCHEMA_ERRORS or pair.error_kind in REPEAT_ERRORS:
        return f"no call succeeded within {FIX_WINDOW} replies of it in its turn"
    if pair.error_kind in WRONG_TARGET or (pair.error_kind in MCP_FAILURES and is_mcp_tool(pair.tool)):
        return f"no {pair.tool} call succeeded within {FIX_WINDOW} replies of it in its turn"
    return "no correction"


def _as_made(message: Message, made: dict[str, Any]) -> Message:
    """The fixing call (`made`, in its canonical form) as the model sent it: the whole reply (its
    text as written) when that call is all it made, else that call alone."""
    calls = message.get("tool_calls") or []
    content = message.get("content") if len(calls) == 1 else ""
    return {"role": "assistant", "content": content or "", "tool_calls": [made]}


def _net_change(
    ws: Workspace,
    pair: Pair,
    path: str,
    seq: int,
    fixed_at: float | None,
    after: str | None,
    call_id: str | None = None,
) -> Fit:
    known, before = ws.state_at_prefix(pair.session_id, path, seq)
    if not known:
        return Fit(None, "file state at the prefix not recorded")
    if fixed_at is not None:
        if ws.changed_between(pair.session_id, seq, fixed_at) - {path}:
            return Fit(None, "fix changed other files too")
        after = ws.state_at(pair.session_id, path, fixed_at)
    if after == before:
        return Fit(None, "no net change")
    if after is None:
        call = {"name": "delete_file", "arguments": {"path": path}}
    elif before is None:
        call = {"name": "create_file", "arguments": {"path": path, "content": after}}
    else:
        edit = minimal_edit(before, after)
        if edit is None:
            return Fit(None, "no unique old_text")
        call = {"name": "edit_file", "arguments": {"path": path, "old_text": edit[0], "new_text": edit[1]}}
    if call["name"] not in tool_names(pair.tools):
        return Fit(None, f"no {call['name']} tool")
    return Fit(_reply({"id": call_id or f"call_fix_{seq}", "type": "function", "function": call}), derived=True)


def minimal_edit(before: str, after: str) -> tuple[str, str] | None:
    """(old_text, new_text): whole lines around the change, widened until old_text occurs exactly
    once in `before`; applying it to `before` gives `after`. None when no such span exists."""
    a, b = before.splitlines(keepends=True), after.splitlines(keepends=True)
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    start, end_a, end_b = head, len(a) - tail, len(b) - tail
    while True:
        old = "".join(a[start:end_a])
        if old and before.count(old) == 1:
            new = "".join(b[start:end_b])
            return (old, new) if before.replace(old, new, 1) == after else None
        if start > 0:
            start -= 1
        elif end_a < len(a):
            end_a, end_b = end_a + 1, end_b + 1
        else:
            return None


def _reply(call: dict[str, Any]) -> Message:
    return {"role": "assistant", "content": "", "tool_calls": [call]}
