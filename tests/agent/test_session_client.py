"""The session's client API is named once (agent.interfaces.SessionClient), and both sessions a host
can hold, the one in this process and the one in a worker process, provide all of it."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import ClassVar

import pytest

from agent.config import Settings
from agent.interfaces import SessionClient
from agent.protocol import Op
from agent.remote import RemoteSession
from agent.runtime import open_session
from agent.session import Session

MEMBERS = sorted(
    name for name, value in vars(SessionClient).items() if not name.startswith("_") and inspect.isfunction(value)
)


def test_the_client_api_names_what_the_hosts_use() -> None:
    assert {"subscribe", "run", "submit", "interrupt", "last_turn_changes", "close"} <= set(MEMBERS)
    assert "id" in SessionClient.__annotations__


@pytest.mark.parametrize("cls", [Session, RemoteSession])
@pytest.mark.parametrize("name", MEMBERS)
def test_each_session_provides_the_member_with_a_compatible_signature(cls: type, name: str) -> None:
    wanted = getattr(SessionClient, name)
    found = getattr(cls, name, None)
    assert callable(found), f"{cls.__name__} has no {name}()"
    assert inspect.iscoroutinefunction(found) == inspect.iscoroutinefunction(wanted), name
    want = list(inspect.signature(wanted).parameters.values())[1:]
    have = list(inspect.signature(found).parameters.values())[1:]
    assert [p.name for p in have[: len(want)]] == [p.name for p in want], f"{cls.__name__}.{name}"
    assert all(p.default is not inspect.Parameter.empty for p in have[len(want) :]), f"{cls.__name__}.{name}"


@pytest.mark.parametrize("cls", [Session, RemoteSession])
def test_each_session_has_an_id(cls: type) -> None:
    assert "self.id = " in inspect.getsource(cls)


async def test_an_op_the_session_does_not_serve_is_refused_by_name(git_repo, script) -> None:
    @dataclass(frozen=True, kw_only=True)
    class Nudge(Op):
        type: ClassVar[str] = "nudge"

    session = open_session(git_repo, Settings(model=script()))
    with pytest.raises(ValueError, match="does not serve nudge ops"):
        await session.submit(Nudge())
