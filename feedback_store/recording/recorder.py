"""The Recorder: a session subscriber that writes each event the moment it is emitted.

Each event is one IMMEDIATE transaction, committed before the call returns, so a crash or a kill
loses nothing already emitted. Events are keyed by id: replaying a log writes no duplicates.
Streaming deltas (AssistantDelta) are not stored: the AssistantMessage that follows them carries
the whole text.

When the database refuses a write (locked past the store's wait, turned read-only, disk full) the
event is kept in memory, in order, and written with the next event or by `flush()`: nothing is
dropped while the process lives, and the failure is reported (raised, or passed to `on_error`).

One event can never stop the recording of the next: each event, and each step derived from it (its
table rows, the reward-hacking checks, its feedback pair), runs in its own savepoint. A step that
fails on an event is undone and noted in `recording_notes` (which step, and why), the event row and
its other steps are kept, and the events after it are written as usual. Since almost nothing
fails, a write first records its events with no savepoint at all; only when something fails is
that write rolled back and done again with each event and step in a savepoint of its own.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from agent.protocol import (
    LONE_SURROGATE,
    ApprovalRequested,
    ApprovalResolved,
    AssistantDelta,
    AssistantMessage,
    EditApplied,
    EditReviewed,
    Event,
    HookRan,
    ModelUsage,
    PlanProposed,
    PlanReviewed,
    SessionStarted,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
    event_from_dict,
)
from feedback_store.content import event_blobs
from feedback_store.content.event_blobs import JSON, TEXT
from feedback_store.content.hashing import canonical_json, content_hash, message_json, ordered_json, row_json
from feedback_store.errors import StoreError
from feedback_store.recording import monitor, pairs, plans, renders
from feedback_store.store import Store
from feedback_store.team import provenance

log = logging.getLogger(__name__)

TITLE_LENGTH = 80
NOTE_CHARS = 500


class Recorder:
    """`session.subscribe(Recorder(store))` records everything the session emits.

    `then` sees each event once it is committed (deltas at once), so what a frontend shows is
    already durable; while recording is failing it sees them at once, the failure having been
    reported. `on_error` is told when recording starts failing (without it the StoreError is
    raised to the emitter) and when an event is refused for good.
    """

    def __init__(
        self,
        store: Store,
        *,
        then: Callable[[Event], None] | None = None,
        on_error: Callable[[StoreError], None] | None = None,
    ) -> None:
        self.store = store
        self.then = then
        self.on_error = on_error
        self.pending: list[Event] = []  # not yet committed, oldest first
        self.lost: list[Event] = []  # refused by the database itself (a constraint), never to be written
        self.error: StoreError | None = None  # why the pending events wait, while they do
        self._shown = 0  # how many of `pending` `then` has already seen

    def __call__(self, event: Event) -> None:
        if isinstance(event, AssistantDelta):
            self._show([event])
            return
        self.pending.append(event)
        self._write(wait=0 if self.error else None)  # while failing, one quick try per event

    def flush(self, wait: float | None = None) -> list[Event]:
        """Write what is pending, waiting up to `wait` s (default: the store's); return what is not."""
        if self.pending:
            self._write(wait)
        return list(self.pending)

    def _write(self, wait: float | None) -> None:
        try:
            refused = _write_events(self.store, self.pending, wait)
        except StoreError as exc:
            self._failed(exc)
            return
        done, shown = self.pending, self._shown
        self.pending, self._shown, self.error = [], 0, None
        self._show(done[shown:])
        if refused:
            self.lost += refused
            self._report(
                StoreError(
                    f"The feedback database {self.store.path} refused {len(refused)} event(s) "
                    f"({', '.join(e.type for e in refused)}); they are not recorded. This is a teachback "
                    "bug: please report it with the log (-v)."
                )
            )

    def _failed(self, exc: StoreError) -> None:
        first, self.error = self.error is None, exc
        self._show(self.pending[self._shown :])
        self._shown = len(self.pending)
        if first:
            self._report(
                StoreError(
                    f"{exc} {len(self.pending)} event(s) not yet recorded are kept in memory and written "
                    "as soon as the database takes writes again."
                ),
                cause=exc,
            )

    def _report(self, error: StoreError, cause: BaseException | None = None) -> None:
        if self.on_error is None:
            raise error from cause
        self.on_error(error)

    def _show(self, events: Sequence[Event]) -> None:
        if self.then is None:
            return
        for event in events:  # one event a frontend cannot show must not hide the ones after it
            try:
                self.then(event)
            except Exception as exc:
                log.warning("showing %s %s failed: %r (run with -v for details)", event.type, event.id, exc)
                log.debug("showing %s failed", event.type, exc_info=True)

    def record_many(self, events: Iterable[Event]) -> list[Event]:
        """Record a whole log in one transaction (imports and replays); return the events that
        could not be written at all."""
        return _write_events(self.store, [e for e in events if not isinstance(e, AssistantDelta)])


# The database itself failing (locked, read-only, full, I/O): the whole write waits and is retried.
# Any other error comes from an event (a value of the wrong type, a constraint, a bug in a check)
# and would fail again: that event, or the step of it that failed, is set aside and the rest goes on.
DATABASE_DOWN = (sqlite3.OperationalError,)


# False while a write records its events with no savepoint per event or step.
_GUARDED = contextvars.ContextVar("recorder_guarded", default=True)


class _Redo(Exception):
    """Recording a write's events at once failed on one of them (not the database): roll the write
    back and record each event and step in a savepoint of its own."""


def _write_events(store: Store, events: Sequence[Event], wait: float | None = None) -> list[Event]:
    """Record `events` in one write transaction; return those that could not be written at all.
    First at once, with no savepoint (nearly always nothing fails: the same rows for a fraction
    of the statements); should an event fail, the write is rolled back and done again guarded."""
    try:
        with store.write(wait=wait) as conn:
            _record_at_once(conn, events)
        return []
    except _Redo:
        log.debug("recording %d event(s) at once failed; recording each on its own", len(events), exc_info=True)
    with store.write(wait=wait) as conn:
        return _record_each(conn, events)


def _record_at_once(conn: sqlite3.Connection, events: Sequence[Event]) -> None:
    token = _GUARDED.set(False)
    try:
        for event in events:
            record(conn, event)
    except DATABASE_DOWN:
        raise
    except Exception as exc:
        raise _Redo from exc
    finally:
        _GUARDED.reset(token)


def _record_each(conn: sqlite3.Connection, events: Sequence[Event]) -> list[Event]:
    """Record `events` in the open transaction, each in a savepoint; return those that could not be
    written at all, each undone on its own so it cannot keep the others out. The database failing
    propagates and the transaction rolls back."""
    refused = []
    for event in events:
        try:
            with _savepoint(conn, "recorder_event"):
                record(conn, event)
        except DATABASE_DOWN:
            raise
        except Exception as exc:
            log.warning("%s %s could not be recorded: %r (run with -v for details)", event.type, event.id, exc)
            log.debug("recording %s failed", event.type, exc_info=True)
            refused.append(event)
    return refused


@contextmanager
def _savepoint(conn: sqlite3.Connection, name: str) -> Iterator[None]:
    """A savepoint; none while unguarded (a failure then rolls back the whole write)."""
    if not _GUARDED.get():
        yield
        return
    conn.execute(f"SAVEPOINT {name}")
    try:
        yield
    except BaseException:
        conn.execute(f"ROLLBACK TO {name}")
        raise
    finally:
        conn.execute(f"RELEASE {name}")


def _step(
    conn: sqlite3.Connection,
    event: Event,
    stage: str,
    fn: Callable[[], object],
    undone: Callable[[], object] | None = None,
) -> None:
    """One step of recording `event` (a table's rows, a check, a pair) in its own savepoint. A step
    that fails on this event is undone (then `undone` is called), noted in `recording_notes` and
    logged once; the event and its other steps are still written, and so is every event after it."""
    if not _GUARDED.get():
        fn()
        return
    try:
        with _savepoint(conn, "recorder_step"):
            fn()
    except DATABASE_DOWN:
        raise
    except Exception as exc:
        log.warning(
            "recording %s %s: the %s step failed (%r) and was skipped; the event is recorded with a note "
            "(run with -v for details)",
            event.type,
            event.id,
            stage,
            exc,
        )
        log.debug("the %s step failed", stage, exc_info=True)
        if undone is not None:
            undone()
        _note(conn, event, stage, f"{type(exc).__name__}: {exc}")


def _note(conn: sqlite3.Connection, event: Event, stage: str, problem: str) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO recording_notes (id, session_id, event_id, stage, problem, ts) VALUES (?, ?, ?, ?, ?, ?)",
        (f"{event.id}-{stage}", event.session_id, event.id, stage, ascii(problem)[1:-1][:NOTE_CHARS], event.ts),
    )


def record(conn: sqlite3.Connection, event: Event) -> bool:
    """Write one event and everything derived from it; False when it was already recorded. Text that
    SQLite cannot store (a lone surrogate the model sent) is written with U+FFFD in its place, noted."""
    if not _GUARDED.get():  # a failure, that one too, rolls the write back to be done again guarded
        return _record(conn, event)
    try:
        with _savepoint(conn, "recorder_text"):
            return _record(conn, event)
    except UnicodeEncodeError:
        clean, replaced = _without_surrogates(event)
        inserted = _record(conn, clean)
        if inserted:
            _note(conn, event, "text", f"{replaced} lone UTF-16 surrogate(s) stored as U+FFFD")
        return inserted


def _record(conn: sqlite3.Connection, event: Event) -> bool:
    if isinstance(event, ModelUsage):
        return _record_usage(conn, event)
    row = event_blobs.slim(conn, event.to_dict(), put_blob)
    if not _insert_event(conn, event, row_json(row)):
        return False
    handler = HANDLERS.get(type(event))
    if handler is not None:
        _step(conn, event, event.type, lambda: handler(conn, event, row))
    return True


def _insert_event(conn: sqlite3.Connection, event: Event, stored: str) -> int:
    return conn.execute(
        "INSERT OR IGNORE INTO events (id, session_id, type, ts, cause_id, json) VALUES (?, ?, ?, ?, ?, ?)",
        (event.id, event.session_id, event.type, event.ts, event.cause_id, stored),
    ).rowcount


def _record_usage(conn: sqlite3.Connection, event: ModelUsage) -> bool:
    """A model call: its rendered prompt is stored in chunks shared between calls, and its events row
    names them. The rows are made first and written once; should they fail to be made or written,
    the events row keeps the event whole and the failure is noted, as for any handler."""
    rows = renders.UsageRows(conn, event)
    if not _insert_event(conn, event, rows.json):
        return False
    _step(
        conn,
        event,
        event.type,
        lambda: _model_usage(conn, event, rows),
        undone=lambda: conn.execute("UPDATE events SET json = ? WHERE id = ?", (event.to_json(), event.id)),
    )
    return True


def _without_surrogates(event: Event) -> tuple[Event, int]:
    """`event` with every lone surrogate in its text replaced by U+FFFD (as exports write them), and
    how many there were."""
    text, count = LONE_SURROGATE.subn("\ufffd", json.dumps(event.to_dict(), ensure_ascii=False))
    return event_from_dict(json.loads(text)), count


def _named(row: dict[str, Any], field: str, marker: str) -> str | None:
    """The hash of the blob an events row names for the event's `field` (a large value, kept with
    `marker`): the table rows name the same blob, already written."""
    value = row.get(field)
    if isinstance(value, dict) and len(value) == 1 and marker in value:
        return value[marker]
    return None


def put_blob(conn: sqlite3.Connection, kind: str, text: str | None) -> str | None:
    if text is None:
        return None
    key = content_hash(text)
    _insert_blob(conn, key, kind, text)
    return key


def _insert_blob(conn: sqlite3.Connection, key: str, kind: str, text: str) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO blobs (hash, kind, size, content) VALUES (?, ?, ?, ?)", (key, kind, len(text), text)
    )


def _add_message(conn: sqlite3.Connection, session_id: str, event_id: str, message: dict) -> int:
    return conn.execute(
        """
        INSERT INTO messages (session_id, seq, event_id, role, message)
        SELECT ?, coalesce(max(seq), -1) + 1, ?, ?, ? FROM messages WHERE session_id = ? RETURNING seq
        """,
        (session_id, event_id, message.get("role"), message_json(message), session_id),
    ).fetchone()[0]


LAST_ASSISTANT_SEQ = "(SELECT max(seq) FROM messages WHERE session_id = ? AND role = 'assistant')"


def _last_assistant_seq(conn: sqlite3.Connection, session_id: str) -> int | None:
    return conn.execute(f"SELECT {LAST_ASSISTANT_SEQ}", (session_id,)).fetchone()[0]


def _session_started(conn: sqlite3.Connection, event: SessionStarted, row: dict[str, Any]) -> None:
    prompt_hash = _named(row, "system_prompt", TEXT) or put_blob(conn, "system_prompt", event.system_prompt)
    tools_hash = _named(row, "tools", JSON) or put_blob(conn, "tools", ordered_json(event.tools))
    conn.execute(
        """
        INSERT INTO sessions (id, workspace, model, frontend, git_head, config, system_prompt_hash,
            tools_hash, protocol_version, started_at, repository)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (id) DO UPDATE SET workspace = excluded.workspace, model = excluded.model,
            frontend = excluded.frontend, git_head = excluded.git_head, config = excluded.config,
            repository = excluded.repository,
            system_prompt_hash = excluded.system_prompt_hash, tools_hash = excluded.tools_hash,
            protocol_version = excluded.protocol_version,
            started_at = min(coalesce(sessions.started_at, excluded.started_at), excluded.started_at)
        """,
        (
            event.session_id,
            event.workspace,
            event.model,
            event.frontend,
            event.git_head,
            canonical_json(event.config),
            prompt_hash,
            tools_hash,
            event.protocol_version,
            event.ts,
            event.repository,
        ),
    )
    # An imported session names its agent in its config (feedback_store.recording.imports); ours is teachback.
    agent = event.config.get("agent") or provenance.TEACHBACK_AGENT
    version = event.config.get("agent_version") if "agent" in event.config else provenance.teachback_version()
    provenance.stamp(conn, event.session_id, agent, version)
    has_messages = conn.execute("SELECT 1 FROM messages WHERE session_id = ? LIMIT 1", (event.session_id,)).fetchone()
    if not has_messages:  # a resumed session keeps its recorded conversation
        _add_message(conn, event.session_id, event.id, {"role": "system", "content": event.system_prompt})


def _turn_started(conn: sqlite3.Connection, event: TurnStarted, row: dict[str, Any]) -> None:
    title = event.text.strip().splitlines()[0][:TITLE_LENGTH] if event.text.strip() else None
    conn.execute("INSERT OR IGNORE INTO sessions (id, started_at) VALUES (?, ?)", (event.session_id, event.ts))
    conn.execute("UPDATE sessions SET title = ? WHERE id = ? AND title IS NULL", (title, event.session_id))
    conn.execute(
        "INSERT INTO turns (id, session_id, turn, text, started_at) VALUES (?, ?, ?, ?, ?)",
        (event.id, event.session_id, event.turn, event.text, event.ts),
    )
    _add_message(conn, event.session_id, event.id, event.message)


def _assistant_message(conn: sqlite3.Connection, event: AssistantMessage, row: dict[str, Any]) -> None:
    _add_message(conn, event.session_id, event.id, event.message)


def _model_usage(conn: sqlite3.Connection, event: ModelUsage, rows: renders.UsageRows) -> None:
    if rows.problem is not None:
        raise rows.problem
    for key, kind, text in rows.blobs:  # hashed when the rows were made
        _insert_blob(conn, key, kind, text)
    render = rows.render
    conn.execute(
        """
        INSERT INTO model_calls (id, session_id, step, model, prompt_tokens, completion_tokens,
            cost_usd, latency_ms, attempts, logprobs, ts, tool_mode, rendered, prompt_token_ids,
            completion_token_ids) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """,
        (
            event.id,
            event.session_id,
            event.step,
            event.model,
            event.prompt_tokens,
            event.completion_tokens,
            event.cost_usd,
            event.latency_ms,
            event.attempts,
            None if event.logprobs is None else json.dumps(event.logprobs),
            event.ts,
            render["tool_mode"],
            render["rendered"],
            render["prompt_token_ids"],
            render["completion_token_ids"],
        ),
    )


def _tool_call_started(conn: sqlite3.Connection, event: ToolCallStarted, row: dict[str, Any]) -> None:
    seq = conn.execute(
        f"""
        INSERT INTO tool_calls (id, session_id, call_id, name, arguments, step, message_seq, status, started_at)
        VALUES (?, ?, ?, ?, ?, ?, {LAST_ASSISTANT_SEQ}, 'running', ?) RETURNING message_seq
        """,
        (
            event.id,
            event.session_id,
            event.call_id,
            event.name,
            event.arguments,
            event.step,
            event.session_id,
            event.ts,
        ),
    ).fetchone()[0]
    if seq is not None:  # every tool's arguments: command lines, and the paths read, listed or searched
        _step(
            conn,
            event,
            "monitor",
            lambda: _flag(conn, event, seq, monitor.check_call(event.name, event.args, event.roles)),
        )


def _tool_call_finished(conn: sqlite3.Connection, event: ToolCallFinished, row: dict[str, Any]) -> None:
    if event.message is not None:
        _add_message(conn, event.session_id, event.id, event.message)
    status = "ok" if event.ok else "error"
    values = (status, event.error_kind, event.target, event.result, event.duration_ms, event.ts)
    started = conn.execute(
        """
        UPDATE tool_calls SET status = ?, error_kind = ?, target = ?, result = ?, duration_ms = ?, finished_at = ?
        WHERE id = (SELECT id FROM tool_calls WHERE session_id = ? AND call_id = ? AND status = 'running'
                    ORDER BY started_at DESC LIMIT 1)
        RETURNING message_seq
        """,
        (*values, event.session_id, event.call_id),
    ).fetchone()
    if started is not None:
        seq = started[0]
    else:  # finished without starting: a call skipped by an interrupt
        seq = _last_assistant_seq(conn, event.session_id)
        conn.execute(
            """
            INSERT INTO tool_calls (id, session_id, call_id, name, step, message_seq, status, error_kind,
                target, result, duration_ms, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            (event.id, event.session_id, event.call_id, event.name, event.step, seq, *values),
        )
        if event.error_kind in ("denied", "interrupted"):
            return  # the user stopped the turn; the model did nothing wrong
    _step(conn, event, "pairs", lambda: pairs.on_tool_finished(conn, event, seq))


def _edit_applied(conn: sqlite3.Connection, event: EditApplied, row: dict[str, Any]) -> None:
    call = conn.execute(
        "SELECT message_seq FROM tool_calls WHERE session_id = ? AND call_id = ? ORDER BY started_at DESC LIMIT 1",
        (event.session_id, event.call_id),
    ).fetchone()
    seq = call[0] if call else _last_assistant_seq(conn, event.session_id)
    conn.execute(
        """
        INSERT INTO edits (id, session_id, call_id, event_id, message_seq, path, new_path, kind,
            before_hash, after_hash, diff, syntax_error, ts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """,
        (
            event.edit_id,
            event.session_id,
            event.call_id,
            event.id,
            seq,
            event.path,
            event.new_path,
            event.kind,
            _named(row, "before", TEXT) or put_blob(conn, "file", event.before),
            _named(row, "after", TEXT) or put_blob(conn, "file", event.after),
            event.diff,
            event.syntax_error,
            event.ts,
        ),
    )
    _step(conn, event, "pairs", lambda: pairs.on_edit(conn, event, seq))
    _step(conn, event, "plans", lambda: plans.on_edit(conn, event, seq))
    if seq is not None:
        _step(conn, event, "monitor", lambda: _check_edit(conn, event, seq))


def _check_edit(conn: sqlite3.Connection, event: EditApplied, seq: int) -> None:
    findings = monitor.check_edit(
        event.path,
        event.kind,
        event.before,
        event.after,
        event.diff,
        event.new_path,
        test_text=_test_text(conn, event.session_id) if monitor.LITERAL_BRANCH.search(event.diff) else "",
    )
    _flag(conn, event, seq, findings)


def _test_text(conn: sqlite3.Connection, session_id: str) -> str:
    """Test code the session has seen: test files it read or wrote (for the hard-coding rule)."""
    texts = []
    for target, result in conn.execute(
        "SELECT target, result FROM tool_calls WHERE session_id = ? AND status = 'ok' AND name = 'read_file'",
        (session_id,),
    ):
        if monitor.is_test_path(target):
            texts.append(result or "")
    for path, content in conn.execute(
        "SELECT e.path, b.content FROM edits e JOIN blobs b ON b.hash = e.after_hash WHERE e.session_id = ?",
        (session_id,),
    ):
        if monitor.is_test_path(path):
            texts.append(content)
    return "\n".join(texts)


def _flag(conn: sqlite3.Connection, event: Event, seq: int, findings: list[monitor.Finding]) -> None:
    for finding in findings:
        conn.execute(
            "INSERT OR IGNORE INTO flags (id, session_id, rule, detail, event_id, created_at) VALUES (?, ?, ?, ?, ?, ?)",
            (f"{event.id}-{finding.rule}", event.session_id, finding.rule, finding.detail, event.id, event.ts),
        )
        pairs.open_pair(
            conn,
            source="monitor",
            session_id=event.session_id,
            failure_event_id=f"{event.id}-{finding.rule}",
            completion_seq=seq,
            feedback=finding.feedback,
            ts=event.ts,
            tool=getattr(event, "name", None)
            or pairs.tool_of_call(conn, event.session_id, getattr(event, "call_id", None)),
            error_kind=finding.rule,
            target=getattr(event, "path", None) or finding.detail,
        )


def _approval_requested(conn: sqlite3.Connection, event: ApprovalRequested, row: dict[str, Any]) -> None:
    conn.execute(
        """
        INSERT OR IGNORE INTO approvals (id, session_id, call_id, action, summary, detail, requested_at)
        VALUES (?, ?, ?, ?, ?, ?, ?)
        """,
        (event.request_id, event.session_id, event.call_id, event.action, event.summary, event.detail, event.ts),
    )


def _approval_resolved(conn: sqlite3.Connection, event: ApprovalResolved, row: dict[str, Any]) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO approvals (id, session_id, call_id) VALUES (?, ?, ?)",
        (event.request_id, event.session_id, event.call_id),
    )
    conn.execute(
        "UPDATE approvals SET approved = ?, comment = ?, resolved_at = ? WHERE id = ?",
        (int(event.approved), event.comment, event.ts, event.request_id),
    )


def _edit_reviewed(conn: sqlite3.Connection, event: EditReviewed, row: dict[str, Any]) -> None:
    conn.execute(
        "UPDATE edits SET decision = ?, comment = ?, user_hash = ?, reviewed_at = ? WHERE id = ?",
        (
            event.decision,
            event.comment,
            _named(row, "user_content", TEXT) or put_blob(conn, "file", event.user_content),
            event.ts,
            event.edit_id,
        ),
    )
    _step(conn, event, "pairs", lambda: pairs.on_review(conn, event))


def _turn_finished(conn: sqlite3.Connection, event: TurnFinished, row: dict[str, Any]) -> None:
    conn.execute(
        """
        UPDATE turns SET finished_at = ?, reason = ?, summary = ?, steps = ?, prompt_tokens = ?,
            completion_tokens = ?, cost_usd = ? WHERE session_id = ? AND turn = ? AND finished_at IS NULL
        """,
        (
            event.ts,
            event.reason,
            event.summary,
            event.steps,
            event.prompt_tokens,
            event.completion_tokens,
            event.cost_usd,
            event.session_id,
            event.turn,
        ),
    )


def _hook_ran(conn: sqlite3.Connection, event: HookRan, row: dict[str, Any]) -> None:
    if event.message is not None:  # a Stop hook's reason, sent to the model: part of the conversation
        _add_message(conn, event.session_id, event.id, event.message)


# Each handler writes an event's table rows, given its events row (large values as blob markers).
HANDLERS: dict[type[Event], Callable[[sqlite3.Connection, Event, dict[str, Any]], None]] = {
    SessionStarted: _session_started,  # type: ignore[dict-item]
    TurnStarted: _turn_started,  # type: ignore[dict-item]
    AssistantMessage: _assistant_message,  # type: ignore[dict-item]
    ToolCallStarted: _tool_call_started,  # type: ignore[dict-item]
    ToolCallFinished: _tool_call_finished,  # type: ignore[dict-item]
    EditApplied: _edit_applied,  # type: ignore[dict-item]
    ApprovalRequested: _approval_requested,  # type: ignore[dict-item]
    ApprovalResolved: _approval_resolved,  # type: ignore[dict-item]
    EditReviewed: _edit_reviewed,  # type: ignore[dict-item]
    TurnFinished: _turn_finished,  # type: ignore[dict-item]
    HookRan: _hook_ran,  # type: ignore[dict-item]
    PlanProposed: lambda conn, event, row: plans.on_plan_proposed(conn, event),  # type: ignore[dict-item]
    PlanReviewed: lambda conn, event, row: plans.on_plan_reviewed(conn, event),  # type: ignore[dict-item]
}
