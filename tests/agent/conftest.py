from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import Settings
from agent.protocol import Event, TurnFinished, UserInput
from agent.runtime import open_session
from agent.session import Session


class Run:
    def __init__(self, session: Session, events: list[Event], finished: TurnFinished) -> None:
        self.session, self.events, self.finished = session, events, finished

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]


@pytest.fixture
def run_agent():
    async def run(root: Path, model: str, instruction: str = "do the task", **settings) -> Run:
        settings.setdefault("approval", "full-auto")
        session = open_session(root, Settings(model=model, **settings))
        events: list[Event] = []
        session.subscribe(events.append)
        finished = await session.run(UserInput(text=instruction))
        return Run(session, events, finished)

    return run
