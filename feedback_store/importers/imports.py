"""Sessions other coding agents kept on disk (Claude Code, Codex CLI), read into the store as
teachback sessions with their feedback pairs.

Each importer (feedback_store.importers.claude, feedback_store.importers.codex) reads one log file into a
Trail (feedback_store.importers.trail): the session as teachback events (session, turns, replies, tool calls and their results,
refusals), each with an id made from the session's id and the item's place in the log. The events
are recorded like a live session's, so the store derives the same pairs from them: a tool error and
the call that fixed it, a call the user refused (with what they said next). Two kinds the recorder
cannot see in an imported log are added here: a reply the user interrupted and then corrected in
words, and a failing command that passed again after an edit (the edit that made it pass is the
correction). The agent's own tool names are kept; where a log holds no tool schemas, the schemas
that agent is known to use stand in (agent_tools.json), else one made from the arguments seen.

Importing is idempotent (ids are stable: a second import inserts nothing), incremental (a file whose
size and time are unchanged is not read again; a grown one adds its new lines) and tolerant: a line
of a kind the importer does not know is counted and skipped, and a line that cannot be read (not JSON,
too long, nested too deep, a field of the wrong type: feedback_store.importers.log_lines) is counted,
named by file and line number, and skipped. Only regular files are read; anything else is named.
"""

from __future__ import annotations

import os
import stat as stat_module
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from feedback_store.errors import StoreError
from feedback_store.importers.log_lines import NotALogFile, not_regular
from feedback_store.importers.log_pairs import command_pairs, interruption_pair
from feedback_store.importers.trail import Trail
from feedback_store.recording.recorder import Recorder
from feedback_store.store import Store

Read = TypeVar("Read")  # what a log reader makes of one file
MAX_NAMED = 50  # bad lines named in the summary; the rest are counted


@dataclass
class ImportReport:
    files: int = 0
    sessions_added: int = 0
    sessions_updated: int = 0
    sessions_read: int = 0  # sessions found in the files read, whether or not they added anything
    unchanged: int = 0
    events: int = 0
    pairs: int = 0
    lines: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    bad_lines: list[str] = field(default_factory=list)  # "FILE:LINE: what is wrong with it"
    problems: list[str] = field(default_factory=list)  # files that could not be read, and why

    @property
    def nothing_read(self) -> bool:
        """Files were found and not one of them could be read."""
        return self.files > 0 and len(self.problems) == self.files

    def summary(self, agent: str, units: str = "lines") -> str:
        text = (
            f"Imported {self.sessions_added} new and {self.sessions_updated} changed {agent} session(s) "
            f"from {self.files} file(s) ({self.unchanged} unchanged): {self.events} events, {self.pairs} feedback pairs."
        )
        if self.skipped:
            text += f" Skipped {units}: " + ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items())) + "."
        if self.problems:
            text += f" Skipped {len(self.problems)} file(s) that could not be read (listed on stderr)."
        shown = self.bad_lines[:MAX_NAMED]
        lines = [text] + [f"  skipped {bad}" for bad in shown]
        if len(self.bad_lines) > len(shown):
            lines.append(f"  ... and {len(self.bad_lines) - len(shown)} more line(s) that could not be read")
        return "\n".join(lines)


def import_logs(
    store: Store,
    agent: str,
    files: Iterable[Path],
    read: Callable[[Path], Trail | None],
) -> ImportReport:
    """Import each log file not imported before, or changed since; count what was skipped."""
    report = ImportReport()
    for path, stat, trail in files_to_read(store, files, report, read):
        if trail is not None:
            report.lines += trail.lines
            report.skipped.update(trail.skipped)
            report.bad_lines += [f"{path}:{line.number}: {line.detail}" for line in trail.bad_lines]
        if trail is None or not trail.conversation:
            report.skipped["files with no session in them"] += 1
            continue
        record_trail(store, trail, report)
        remember_import(store, path, agent, trail.session_id, stat, trail.lines, sum(trail.skipped.values()))
    return report


def files_to_read(
    store: Store, files: Iterable[Path], report: ImportReport, read: Callable[[Path], Read]
) -> Iterator[tuple[Path, os.stat_result, Read]]:
    """Each file not imported before, or changed since, with what `read` made of it; a file that is not
    such a log, or cannot be read, is named in `report` instead."""
    for path in files:
        stat = changed_file(store, path, report)
        if stat is None:
            continue
        try:
            found = read(path)
        except NotALogFile as exc:
            report.problems.append(str(exc))
            continue
        except OSError as exc:
            report.problems.append(f"{path}: {exc.strerror or exc}")
            continue
        yield path, stat, found


def changed_file(store: Store, path: Path, report: ImportReport) -> os.stat_result | None:
    """The file's stat when it is to be read: a regular file not imported before, or changed since
    (counted in `report`); None, with the reason in `report`, when it is not read."""
    report.files += 1
    try:
        stat = path.stat()
    except OSError as exc:
        report.problems.append(f"{path}: {exc.strerror}")
        return None
    if not stat_module.S_ISREG(stat.st_mode):  # a named pipe would block the read forever
        report.problems.append(not_regular(path, stat.st_mode))
        return None
    known = store.query("SELECT size, mtime FROM imports WHERE path = ?", (str(path),))
    if known and known[0]["size"] == stat.st_size and known[0]["mtime"] == stat.st_mtime:
        report.unchanged += 1
        return None
    return stat


def remember_import(
    store: Store, path: Path, agent: str, session_id: str | None, stat: os.stat_result, lines: int, skipped: int
) -> None:
    """Note what the file held when it was read, so an unchanged file is not read again."""
    with store.write() as conn:
        conn.execute(
            """INSERT OR REPLACE INTO imports (path, agent, session_id, size, mtime, lines, skipped, imported_at)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
            (str(path), agent, session_id, stat.st_size, stat.st_mtime, lines, skipped, time.time()),
        )


def record_trail(store: Store, trail: Trail, report: ImportReport, *, finished: bool = True) -> None:
    """Record the session's events (and the pairs only an imported log shows), counting what was new.
    `finished=False`: a session still running (Trail.events)."""
    report.sessions_read += 1
    existed = bool(store.query("SELECT 1 FROM sessions WHERE id = ?", (trail.session_id,)))
    events = trail.events(finished=finished)
    before = _count(store, trail.session_id)
    refused = Recorder(store).record_many(events)
    if refused:
        raise StoreError(
            f"{len(refused)} event(s) of {trail.session_id} could not be recorded; this is a teachback bug: "
            "please report it with the log (-v)."
        )
    with store.write() as conn:
        for marker, reply, words, ts in trail.interruptions:
            interruption_pair(conn, trail.session_id, marker, reply, words, ts)
        command_pairs(conn, trail.session_id, trail.command_tools, trail.edit_tools)
    events_after, pairs_after = _count(store, trail.session_id)
    report.events += events_after - before[0]
    report.pairs += pairs_after - before[1]
    if events_after > before[0]:
        if existed:
            report.sessions_updated += 1
        else:
            report.sessions_added += 1


def _count(store: Store, session_id: str) -> tuple[int, int]:
    row = store.query(
        "SELECT (SELECT count(*) FROM events WHERE session_id = ?) AS e, (SELECT count(*) FROM pairs WHERE session_id = ?) AS p",
        (session_id, session_id),
    )[0]
    return row["e"], row["p"]
