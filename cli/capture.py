"""`teachback capture`: the command other agents' hooks run (`teachback hooks install` writes it).

As a hook (`teachback capture claude-code|codex [--guard]`, the payload on stdin) it must never hurt
its host: it always exits 0, prints nothing unless a guard denies a call, never waits for a locked
database, and imports almost nothing (cli.entry calls `hook_main` before its own imports). The
payload goes to the database's inbox, or to its queue while another process writes
(feedback_store.capture.inbox). At the end of a turn it starts `teachback capture --drain` in the
background, which turns the inbox into sessions and pairs (feedback_store.capture.live) and distils
lessons, so the next guarded call knows them.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

AGENTS = ("claude-code", "codex")
MAX_PAYLOAD = 16 * 1024 * 1024  # bytes of one payload; a larger one is left to the transcript
MAX_SESSION_ID = 200
DENY_PREFIX = "teachback learned in this repository that this call fails: "


def hook_main(argv: list[str]) -> int:
    """Run as a hook, then end the process (this never returns). Exit status 0 whatever happens: a
    hook's failure is its host's problem."""
    written = None
    try:
        written = _hook([a for a in argv if a != "--guard"], guard="--guard" in argv)
    except Exception as exc:  # noqa: BLE001  (nothing may reach the host: it is named on stderr instead)
        sys.stderr.write(f"teachback capture: not recorded: {type(exc).__name__}: {exc}\n")
    return _end(keeping=written)


def _end(keeping: object) -> int:
    """End the process at once, leaving `keeping` (the connection that wrote, if any) open:
    what it wrote is committed, and the checkpoint closing it would run (tens of milliseconds, the
    log copied into the file and synced) is left to the store's own processes
    (feedback_store.capture.inbox.deliver)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _hook(names: list[str], *, guard: bool) -> object:
    """The connection that wrote the payload, left open (None: nothing written, or queued)."""
    raw = sys.stdin.buffer.read(MAX_PAYLOAD + 1)
    if len(raw) > MAX_PAYLOAD:
        while sys.stdin.buffer.read(1 << 20):  # read to the end, so the host's write never fails
            continue
        sys.stderr.write("teachback capture: payload too large; the transcript will have it\n")
        return None
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError):
        sys.stderr.write("teachback capture: the payload is not JSON; nothing recorded\n")
        return None
    if not isinstance(payload, dict):
        sys.stderr.write("teachback capture: the payload is not a JSON object; nothing recorded\n")
        return None
    from feedback_store.capture import inbox

    agent = names[0] if names and names[0] in AGENTS else ("codex" if "turn_id" in payload else "claude-code")
    session = payload.get("session_id")
    session = session if isinstance(session, str) and 0 < len(session) <= MAX_SESSION_ID else "unknown"
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else str(Path.cwd())
    db = _database(cwd)
    now = time.time()
    rows = [inbox.Row(agent, session, "hook", now, raw.decode("utf-8", "replace"), inbox.new_key("h"))]
    denial = _guard(db, payload, cwd) if guard and payload.get("hook_event_name") == "PreToolUse" else None
    if denial is not None:
        call_id = payload.get("tool_use_id")
        decision = json.dumps({"call_id": call_id, "lesson": denial[0], "reason": denial[1]})
        rows.append(inbox.Row(agent, session, "guard", now + 1e-6, decision, inbox.new_key("g")))
    written = inbox.deliver(db, rows)
    if denial is not None:
        answer = {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": denial[1]}
        sys.stdout.write(json.dumps({"hookSpecificOutput": answer}))
    if payload.get("hook_event_name") in ("Stop", "SessionEnd"):
        _start_drain(db)
    return written


def _database(cwd: str) -> Path:
    """The configured database. With no config file to read, the environment or the default says
    it, as agent.config would, without importing agent.config (a tenth of the hook's time)."""
    from agent.paths import CONFIG_FILE, teachback_home, user_config_path

    folder = Path(cwd)
    if not user_config_path().is_file() and not (folder / CONFIG_FILE).is_file():
        named = os.environ.get("TEACHBACK_DB")
        return (Path(named).expanduser() if named else teachback_home() / "feedback.db").absolute()
    from agent.config import load_settings

    return load_settings(folder if folder.is_dir() else None).db_path().expanduser().absolute()


def _guard(db: Path, payload: dict, cwd: str) -> tuple[str, str] | None:
    from feedback_store.capture.guard import known_failure, path_target

    target, tool = path_target(payload.get("tool_input")), payload.get("tool_name")
    if target is None or not isinstance(tool, str):
        return None
    found = known_failure(db, tool=tool, target=target, cwd=cwd)
    return None if found is None else (found[0], DENY_PREFIX + found[1])


def _start_drain(db: Path) -> None:
    """Record the turn in the background: the host does not wait for it. `-P` keeps the host's
    folder (which may hold a package named `cli`) off the module path."""
    import subprocess

    subprocess.Popen(
        [sys.executable, "-P", "-m", "cli", "capture", "--drain", "--db", str(db)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


# -- `teachback capture --drain` and the command's own arguments ----------------------------------


def add_capture_arguments(parser) -> None:  # an argparse parser: argparse is not imported here
    parser.add_argument("agent", nargs="?", choices=AGENTS, help="the agent whose hook payload is on stdin")
    parser.add_argument("--guard", action="store_true", help="deny a call this repository's lessons know fails")
    parser.add_argument(
        "--drain", action="store_true", help="record what hooks sent (and queued) as sessions, pairs and lessons"
    )
    parser.add_argument("--db", help="feedback database (default: $TEACHBACK_HOME/feedback.db)")


def capture_main(args) -> int:
    if not args.drain:  # `python -m cli capture ...` reaches here: the same hook
        return hook_main([a for a in (args.agent, "--guard" if args.guard else None) if a])
    from agent.runtime import repository_identity
    from cli.options import configured_db
    from feedback_store.capture.live import process
    from feedback_store.lessons.distill import refresh
    from feedback_store.store import open_store

    with open_store(args.db or configured_db()) as store:
        report = process(store, repository_identity)
        refresh(store)
    print(
        f"Recorded {report.sessions} captured session(s): {report.events} events, {report.pairs} feedback pairs"
        f"{f', {report.transcripts} with what their transcript added' if report.transcripts else ''}."
    )
    for problem in report.problems:
        print(f"teachback capture: not recorded: {problem}", file=sys.stderr)
    return 1 if report.problems else 0
