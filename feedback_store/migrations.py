"""Schema migrations: named, numbered functions applied in order and recorded in `migrations`.

A migration that has shipped is never edited; change the schema by appending a new one.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import sqlite_utils

MIGRATIONS_TABLE = "migrations"

Migration = Callable[[sqlite_utils.Database], None]


def m001_initial_schema(db: sqlite_utils.Database) -> None:
    # Content that repeats (system prompts, tool schema lists, file snapshots), stored once by hash.
    db.create_table(
        "blobs",
        {"hash": str, "kind": str, "size": int, "content": str},
        pk="hash",
        not_null={"kind", "content"},
    )
    db.create_table(
        "sessions",
        {
            "id": str,
            "workspace": str,
            "model": str,
            "frontend": str,
            "git_head": str,
            "config": str,
            "system_prompt_hash": str,
            "tools_hash": str,
            "protocol_version": int,
            "started_at": float,
            "title": str,
        },
        pk="id",
    )
    # Every event as emitted (AssistantDelta excepted), so a session's log can be replayed.
    db.create_table(
        "events",
        {"id": str, "session_id": str, "type": str, "ts": float, "cause_id": str, "json": str},
        pk="id",
        not_null={"session_id", "type", "json"},
    )
    db["events"].create_index(["session_id"], index_name="events_session")
    # The conversation exactly as sent: seq 0 is the system message.
    db.create_table(
        "messages",
        {"session_id": str, "seq": int, "event_id": str, "role": str, "message": str},
        pk=("session_id", "seq"),
        not_null={"message"},
    )
    db.create_table(
        "turns",
        {
            "id": str,
            "session_id": str,
            "turn": int,
            "text": str,
            "started_at": float,
            "finished_at": float,
            "reason": str,
            "summary": str,
            "steps": int,
            "prompt_tokens": int,
            "completion_tokens": int,
            "cost_usd": float,
        },
        pk="id",
    )
    db["turns"].create_index(["session_id", "turn"], index_name="turns_session")
    db.create_table(
        "model_calls",
        {
            "id": str,
            "session_id": str,
            "step": int,
            "model": str,
            "prompt_tokens": int,
            "completion_tokens": int,
            "cost_usd": float,
            "latency_ms": float,
            "attempts": int,
            "logprobs": str,
            "ts": float,
        },
        pk="id",
    )
    db["model_calls"].create_index(["session_id"], index_name="model_calls_session")
    db.create_table(
        "tool_calls",
        {
            "id": str,
            "session_id": str,
            "call_id": str,
            "name": str,
            "arguments": str,
            "step": int,
            "message_seq": int,
            "status": str,  # running | ok | error
            "error_kind": str,
            "target": str,
            "result": str,
            "duration_ms": float,
            "started_at": float,
            "finished_at": float,
        },
        pk="id",
    )
    db["tool_calls"].create_index(["session_id", "call_id"], index_name="tool_calls_call")
    db.create_table(
        "edits",
        {
            "id": str,
            "session_id": str,
            "call_id": str,
            "event_id": str,
            "message_seq": int,
            "path": str,
            "new_path": str,
            "kind": str,
            "before_hash": str,
            "after_hash": str,
            "diff": str,
            "syntax_error": str,
            "decision": str,
            "comment": str,
            "user_hash": str,
            "reviewed_at": float,
            "ts": float,
        },
        pk="id",
    )
    db["edits"].create_index(["session_id", "message_seq"], index_name="edits_session")
    db.create_table(
        "approvals",
        {
            "id": str,
            "session_id": str,
            "call_id": str,
            "action": str,
            "summary": str,
            "detail": str,
            "approved": int,
            "comment": str,
            "requested_at": float,
            "resolved_at": float,
        },
        pk="id",
    )
    db["approvals"].create_index(["session_id", "call_id"], index_name="approvals_call")
    db.create_table(
        "pairs",
        {
            "id": str,
            "session_id": str,
            "source": str,
            "tool": str,
            "error_kind": str,
            "target": str,
            "feedback": str,
            "tools_hash": str,
            "anchor_seq": int,  # the assistant message whose call reported the failure
            "completion_seq": int,  # the assistant message that failed
            "correction_seq": int,  # the assistant message that fixed it
            "correction": str,  # a correction that is not a recorded message (the user's version)
            "closes_on": str,  # how a later event fixes it: next_call | same_call | same_file | same_command
            "failure_event_id": str,
            "correction_event_id": str,
            "created_at": float,
            "corrected_at": float,
        },
        pk="id",
        not_null={"session_id", "source", "feedback", "completion_seq"},
    )
    db["pairs"].create_index(["session_id", "closes_on"], index_name="pairs_session")
    db["pairs"].create_index(["source"], index_name="pairs_source")
    db.create_table(
        "flags",
        {"id": str, "session_id": str, "rule": str, "detail": str, "event_id": str, "created_at": float},
        pk="id",
    )
    db["flags"].create_index(["session_id"], index_name="flags_session")


def m002_model_call_renders(db: sqlite_utils.Database) -> None:
    # What the model was given when it differs from the conversation (text and grammar tool modes)
    # and, for the embedded model, the token ids. Large values are blobs: `rendered` and
    # `prompt_token_ids` hold JSON lists of blob hashes (one per message, one per token chunk), so
    # the long prefix that successive calls share is stored once.
    table = db["model_calls"]
    table.add_column("tool_mode", str)
    table.add_column("rendered", str)
    table.add_column("prompt_token_ids", str)
    table.add_column("completion_token_ids", str)


MIGRATIONS: list[tuple[str, Migration]] = [
    ("m001_initial_schema", m001_initial_schema),
    ("m002_model_call_renders", m002_model_call_renders),
]


def applied(db: sqlite_utils.Database) -> set[str]:
    if not db[MIGRATIONS_TABLE].exists():
        return set()
    return {row[0] for row in db.execute(f"SELECT name FROM {MIGRATIONS_TABLE}").fetchall()}


def migrate(db: sqlite_utils.Database) -> list[str]:
    """Apply pending migrations, each in its own IMMEDIATE transaction; return their names."""
    if set(name for name, _ in MIGRATIONS) <= applied(db):
        return []
    done = []
    for name, migration in MIGRATIONS:
        db.conn.execute("BEGIN IMMEDIATE")
        try:
            db.execute(f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (name TEXT PRIMARY KEY, applied_at REAL)")
            if name not in applied(db):  # re-checked under the write lock: another process may have won
                migration(db)
                db.execute(f"INSERT INTO {MIGRATIONS_TABLE} VALUES (?, ?)", (name, time.time()))
                done.append(name)
            db.conn.execute("COMMIT")
        except BaseException:
            db.conn.execute("ROLLBACK")
            raise
    return done


def m003_lessons(db: sqlite_utils.Database) -> None:
    # Lessons (feedback_store/lessons/lessons.py): a full-text index over failures, kept current by triggers
    # as the recorder writes pairs, and the lessons distilled from them. `lesson_pairs` gives each
    # pair a stable integer key (the index's rowid) and says whether its lesson must be (re)distilled.
    db.execute(
        """CREATE TABLE lesson_pairs (
            id INTEGER PRIMARY KEY, pair_id TEXT NOT NULL UNIQUE, session_id TEXT, lesson_id TEXT,
            pending INTEGER NOT NULL DEFAULT 1)"""
    )
    db.execute("CREATE INDEX lesson_pairs_pending ON lesson_pairs (pending) WHERE pending = 1")
    db.execute("CREATE INDEX lesson_pairs_lesson ON lesson_pairs (lesson_id)")
    db.execute("CREATE INDEX lesson_pairs_session ON lesson_pairs (session_id)")
    db.execute(
        "CREATE VIRTUAL TABLE pair_search USING fts5(tool, error_kind, target, call, feedback, "
        "tokenize = \"unicode61 tokenchars '_'\")"
    )
    db["pairs"].create_index(["tool", "error_kind", "target"], index_name="pairs_situation")
    db.create_table(
        "lessons",
        {
            "id": str,
            "key": str,  # distilled: the situation [tool, error_kind, target] as canonical JSON; user: null
            "origin": str,  # distilled | user
            "tool": str,
            "error_kind": str,
            "target": str,
            "text": str,  # what the model reads (redacted)
            "feedback": str,  # the chosen failure's feedback (redacted, shortened), for `lessons show`
            "correction": str,  # what worked (redacted, shortened) or null
            "edited": int,  # the text was written by a person: distillation leaves it alone
            "pinned": int,
            "deleted": int,
            "occurrences": int,  # pairs from sessions that are not flagged
            "corrected": int,
            "source_pair": str,
            "source_session": str,
            "workspace": str,  # user lessons: where it applies (null: everywhere)
            "author": str,
            "created_at": float,
            "updated_at": float,
            "last_seen": float,
        },
        pk="id",
        not_null={"origin", "text"},
        defaults={"edited": 0, "pinned": 0, "deleted": 0, "occurrences": 0, "corrected": 0},
    )
    db.execute("CREATE UNIQUE INDEX lessons_key ON lessons (key)")
    db["lessons"].create_index(["tool", "error_kind", "target"], index_name="lessons_situation")
    db["lessons"].create_index(["occurrences"], index_name="lessons_occurrences")
    db.execute("CREATE INDEX lessons_pinned ON lessons (pinned) WHERE pinned = 1")
    search_row = "(SELECT id FROM lesson_pairs WHERE pair_id = {0}.id)"
    for trigger in (
        f"""CREATE TRIGGER pairs_lessons_insert AFTER INSERT ON pairs BEGIN
            INSERT OR IGNORE INTO lesson_pairs (pair_id, session_id) VALUES (NEW.id, NEW.session_id);
            INSERT INTO pair_search (rowid, tool, error_kind, target, call, feedback) VALUES (
                {search_row.format("NEW")}, NEW.tool, NEW.error_kind, NEW.target,
                (SELECT substr(arguments, 1, 2000) FROM tool_calls
                 WHERE session_id = NEW.session_id AND message_seq = NEW.completion_seq
                 ORDER BY name IS NOT NEW.tool, started_at DESC LIMIT 1),
                substr(NEW.feedback, 1, 4000));
        END""",
        f"""CREATE TRIGGER pairs_lessons_feedback AFTER UPDATE OF feedback ON pairs BEGIN
            UPDATE pair_search SET feedback = substr(NEW.feedback, 1, 4000) WHERE rowid = {search_row.format("NEW")};
            UPDATE lesson_pairs SET pending = 1 WHERE pair_id = NEW.id;
        END""",
        """CREATE TRIGGER pairs_lessons_corrected AFTER UPDATE OF correction_seq, correction ON pairs BEGIN
            UPDATE lesson_pairs SET pending = 1 WHERE pair_id = NEW.id;
        END""",
        f"""CREATE TRIGGER pairs_lessons_delete AFTER DELETE ON pairs BEGIN
            DELETE FROM pair_search WHERE rowid = {search_row.format("OLD")};
            DELETE FROM lesson_pairs WHERE pair_id = OLD.id;
        END""",
        """CREATE TRIGGER flags_lessons AFTER INSERT ON flags BEGIN
            UPDATE lesson_pairs SET pending = 1 WHERE session_id = NEW.session_id;
        END""",
    ):
        db.execute(trigger)
    # Pairs recorded before this migration: indexed now, distilled at the next refresh.
    db.execute("INSERT INTO lesson_pairs (pair_id, session_id) SELECT id, session_id FROM pairs ORDER BY rowid")
    db.execute(
        """INSERT INTO pair_search (rowid, tool, error_kind, target, call, feedback)
        SELECT lp.id, p.tool, p.error_kind, p.target,
            coalesce(
                (SELECT substr(arguments, 1, 2000) FROM tool_calls t WHERE t.session_id = p.session_id
                 AND t.message_seq = p.completion_seq AND t.name = p.tool ORDER BY t.started_at DESC LIMIT 1),
                (SELECT substr(arguments, 1, 2000) FROM tool_calls t WHERE t.session_id = p.session_id
                 AND t.message_seq = p.completion_seq ORDER BY t.started_at DESC LIMIT 1)),
            substr(p.feedback, 1, 4000)
        FROM pairs p JOIN lesson_pairs lp ON lp.pair_id = p.id"""
    )


MIGRATIONS.append(("m003_lessons", m003_lessons))


def m004_learning_rounds(db: sqlite_utils.Database) -> None:
    # `teachback learn` (trainer/learn.py): one row per round (action 'learn': the data it trained on,
    # its evaluation, whether its adapter was promoted and why) and per rollback (action 'rollback':
    # the adapter returned to, the one left in `parent`). adapter_id null means the base model.
    db.create_table(
        "learning_rounds",
        {
            "id": str,
            "action": str,
            "adapter_id": str,
            "adapter_dir": str,
            "parent": str,
            "base": str,
            "data_hash": str,
            "records": int,
            "since": float,
            "metrics": str,
            "promoted": int,
            "reason": str,
            "started_at": float,
            "finished_at": float,
        },
        pk="id",
        not_null={"action", "promoted", "started_at"},
        defaults={"promoted": 0},
    )
    db["learning_rounds"].create_index(["started_at"], index_name="learning_rounds_started")


MIGRATIONS.append(("m004_learning_rounds", m004_learning_rounds))


def m005_recording_notes(db: sqlite_utils.Database) -> None:
    # A step of recording an event that failed on it (feedback_store/recording/recorder.py: a check, a derived
    # row, text SQLite cannot store): the event itself is recorded; this says which step was skipped.
    db.create_table(
        "recording_notes",
        {"id": str, "session_id": str, "event_id": str, "stage": str, "problem": str, "ts": float},
        pk="id",
        not_null={"session_id", "event_id", "stage"},
    )
    db["recording_notes"].create_index(["session_id"], index_name="recording_notes_session")


MIGRATIONS.append(("m005_recording_notes", m005_recording_notes))


def m006_session_repository(db: sqlite_utils.Database) -> None:
    # The repository's identity (agent.runtime.repository_identity: its root commit): lessons learned
    # in one clone or task attempt of a repository apply in the next, whatever its folder.
    db["sessions"].add_column("repository", str)
    db["sessions"].create_index(["repository"], index_name="sessions_repository")


MIGRATIONS.append(("m006_session_repository", m006_session_repository))


def m007_team_datasets(db: sqlite_utils.Database) -> None:
    # Team datasets (feedback_store/provenance.py, sharing.py, imports.py, merge.py): who recorded a
    # session (the agent, its version, a salted hash of the user and machine), what may be shared,
    # and which foreign session logs were imported from where.
    sessions = db["sessions"]
    sessions.add_column("agent", str)  # teachback | claude-code | codex
    sessions.add_column("agent_version", str)
    sessions.add_column("author", str)  # provenance.author_id: never a name
    # The user's share settings: scope session (key: session id), repository (key: its identity) or
    # workspace (key: its folder; the folder's teachback.toml may then turn sharing on).
    db.create_table(
        "share_settings",
        {"scope": str, "key": str, "shared": int, "reason": str, "set_at": float},
        pk=("scope", "key"),
        not_null={"shared"},
    )
    # One row per imported log file: what it held when it was last read, so a rerun reads only
    # files that are new or changed.
    db.create_table(
        "imports",
        {
            "path": str,
            "agent": str,
            "session_id": str,
            "size": int,
            "mtime": float,
            "lines": int,
            "skipped": int,
            "imported_at": float,
        },
        pk="path",
    )
    # Values of the store itself; `salt` keys the author hash (random, never exported).
    db.create_table("store_meta", {"key": str, "value": str}, pk="key", not_null={"value"})
    db.execute("INSERT INTO store_meta (key, value) VALUES ('salt', lower(hex(randomblob(32))))")


MIGRATIONS.append(("m007_team_datasets", m007_team_datasets))


def m008_pair_correction_call(db: sqlite_utils.Database) -> None:
    # The id of the call that fixed a pair (in the assistant message `correction_seq`), as the
    # recorder knew it when it linked the two: the export reads it here instead of parsing the
    # fixing event's JSON. Pairs linked before this migration get it from that event now.
    db["pairs"].add_column("correction_call_id", str)
    db.execute(
        """UPDATE pairs SET correction_call_id = (
            SELECT json_extract(e.json, '$.call_id') FROM events e
            WHERE e.id = pairs.correction_event_id AND json_valid(e.json))
        WHERE correction_event_id IS NOT NULL"""
    )


MIGRATIONS.append(("m008_pair_correction_call", m008_pair_correction_call))


def m009_hook_inbox(db: sqlite_utils.Database) -> None:
    # What other agents' hooks sent (feedback_store/capture): each payload as it arrived, written by
    # a hook process that imports nothing of the store, then turned into a session's events. Kept
    # after that, so a session is rebuilt from all of its payloads with the same ids every time;
    # `key` keeps what was added from the agent's own transcript from being added twice.
    db.execute(
        """CREATE TABLE hook_inbox (
            id INTEGER PRIMARY KEY,
            agent TEXT NOT NULL,
            session TEXT NOT NULL,
            source TEXT NOT NULL,
            ts REAL NOT NULL,
            payload TEXT NOT NULL,
            key TEXT UNIQUE,
            processed INTEGER NOT NULL DEFAULT 0
        )"""
    )
    db.execute("CREATE INDEX hook_inbox_session ON hook_inbox (agent, session, ts)")
    db.execute("CREATE INDEX hook_inbox_pending ON hook_inbox (processed) WHERE processed = 0")


MIGRATIONS.append(("m009_hook_inbox", m009_hook_inbox))


def m010_call_columns(db: sqlite_utils.Database) -> None:
    # What a call was, written by the recorder as it happens instead of worked out again downstream:
    # the roles its tool declared, a command's exit status, the event that finished it (its result
    # message), whether a hook blocked it. Calls recorded before get them here, once, from their
    # events; a built-in command tool's events from before exit codes were carried name it only in
    # the result text (`[exit code N]`), read here and nowhere else.
    table = db["tool_calls"]
    for column, kind in (("roles", str), ("exit_code", int), ("finished_id", str), ("blocked_by_hook", int)):
        table.add_column(column, kind)
    db.execute(
        """UPDATE tool_calls SET roles = (SELECT json_extract(e.json, '$.roles') FROM events e
            WHERE e.id = tool_calls.id AND e.type = 'tool_call_started' AND json_type(e.json, '$.roles') = 'object')"""
    )
    _link_finishing_events(db)
    db.execute(
        """UPDATE tool_calls SET exit_code = (SELECT json_extract(e.json, '$.exit_code') FROM events e
            WHERE e.id = tool_calls.finished_id AND json_valid(e.json))"""
    )
    commands = [row[0] for row in db.execute("SELECT DISTINCT name FROM tool_calls WHERE exit_code IS NULL")]
    for name in commands:
        _exit_codes_from_text(db, name)
    db.execute(
        """UPDATE tool_calls SET blocked_by_hook = EXISTS (SELECT 1 FROM events e
            WHERE e.session_id = tool_calls.session_id AND e.type = 'hook_ran' AND json_valid(e.json)
            AND json_extract(e.json, '$.call_id') = tool_calls.call_id AND json_extract(e.json, '$.decision') = 'deny')"""
    )
    db.execute("CREATE INDEX tool_calls_finished ON tool_calls (finished_id)")
    db.execute("CREATE INDEX messages_event ON messages (event_id)")  # a call's reply, by the cause it names
    # A plan names the reply that holds it as its cause (agent.plan_mode), as every event names its own.
    db.execute(
        """UPDATE events SET cause_id = json_extract(json, '$.message_id')
        WHERE type = 'plan_proposed' AND cause_id IS NULL AND json_valid(json)"""
    )


def _link_finishing_events(db: sqlite_utils.Database) -> None:
    """Each call's finishing event, in the order they were recorded: the call it names as its cause
    (or itself, for a call finished without starting), else (a log without causes) the latest
    unfinished call with its call id started by then, as the recorder linked them."""
    finished = db.execute(
        """SELECT e.id, e.session_id, e.cause_id, e.ts, json_extract(e.json, '$.call_id') FROM events e
        WHERE e.type = 'tool_call_finished' AND json_valid(e.json) ORDER BY e.rowid"""
    ).fetchall()
    for event_id, session_id, cause_id, ts, call_id in finished:
        linked = db.execute(
            "UPDATE tool_calls SET finished_id = ? WHERE id IN (?, ?) AND finished_id IS NULL",
            (event_id, event_id, cause_id),
        ).rowcount
        if not linked:
            db.execute(
                """UPDATE tool_calls SET finished_id = ? WHERE id = (SELECT id FROM tool_calls
                    WHERE session_id = ? AND call_id = ? AND finished_id IS NULL AND started_at <= ?
                    ORDER BY started_at DESC LIMIT 1)""",
                (event_id, session_id, call_id, ts),
            )


def _exit_codes_from_text(db: sqlite_utils.Database, name: str) -> None:
    from agent.protocol.roles import roles_for  # the built-in tools' declared roles

    if roles_for(name).command is None:
        return
    rows = db.execute(
        "SELECT id, result FROM tool_calls WHERE name = ? AND exit_code IS NULL AND result IS NOT NULL", (name,)
    ).fetchall()
    for call, result in rows:
        found = re.search(r"^\[exit code (\d+)[;\]]", result, re.MULTILINE)
        if found:
            db.execute("UPDATE tool_calls SET exit_code = ? WHERE id = ?", (int(found.group(1)), call))


MIGRATIONS.append(("m010_call_columns", m010_call_columns))
