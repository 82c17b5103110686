"""Real hook commands for the hook tests: small Python scripts written to disk, and the teachback.toml
or .claude/settings.json that names them."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from agent.config import Settings
from agent.protocol import ApprovalDecision, ApprovalRequested, Event, TurnFinished, UserInput
from agent.runtime import open_session
from feedback_store import Recorder, open_store


def hook_script(folder: Path, name: str, body: str) -> str:
    """A hook command: a Python script that has the event as `event` (read from stdin)."""
    path = folder / f"{name}.py"
    path.write_text("import json, os, sys, time\nevent = json.load(sys.stdin)\n" + body)
    return f"{sys.executable} {path}"


def toml_hooks(path: Path, event: str, matcher: str, command: str, timeout: float = 10) -> None:
    """Add one `[[hooks.EVENT]]` group with one command hook to the teachback.toml at `path`."""
    before = path.read_text() if path.exists() else ""
    path.write_text(
        before
        + f"\n[[hooks.{event}]]\nmatcher = {json.dumps(matcher)}\n"
        + f'[[hooks.{event}.hooks]]\ntype = "command"\ncommand = {json.dumps(command)}\ntimeout = {timeout}\n'
    )


def claude_settings(root: Path, hooks: dict[str, Any]) -> None:
    (root / ".claude").mkdir(exist_ok=True)
    (root / ".claude" / "settings.json").write_text(json.dumps({"permissions": {"allow": []}, "hooks": hooks}))


class Ran:
    def __init__(self, session, events: list[Event], finished: TurnFinished) -> None:
        self.session, self.events, self.finished = session, events, finished

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]


async def run_session(
    root: Path, model: str, *, approval: str = "full-auto", db: Path | None = None, answers=(), text="go"
) -> Ran:
    """One turn of a session on `root` (recorded into `db` when given); approval requests are answered
    in order with `answers` (approved, comment), as a frontend would."""
    settings = Settings(model=model, approval=approval, repo_map_tokens=0, db=str(db) if db else None)
    session = open_session(root, settings)
    events: list[Event] = []
    store = open_store(db) if db else None
    if store is not None:
        session.subscribe(Recorder(store))
    session.subscribe(events.append)
    queue = list(answers)

    def answer(event: Event) -> None:
        if isinstance(event, ApprovalRequested):
            approved, comment = queue.pop(0)
            decision = ApprovalDecision(request_id=event.request_id, approved=approved, comment=comment)
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(session.submit(decision)))

    session.subscribe(answer)
    finished = await session.run(UserInput(text=text))
    await session.close()
    if store is not None:
        store.close()
    return Ran(session, events, finished)
