"""The slash commands the agent panel offers (ACP `available_commands_update`): a prompt that is one of
them runs it instead of a turn.

`/undo` restores the files the last turn changed, from the checkpoint teachback keeps before a turn's
first edit (agent.checkpoint); the undo is an Op of the session, so it is recorded like any other."""

from __future__ import annotations

from typing import TYPE_CHECKING

from acp.schema import AvailableCommand, AvailableCommandsUpdate

from agent.checkpoint import UndoError
from agent.protocol import TurnUndone, Undo

if TYPE_CHECKING:
    from acp_server.session import AcpSession

COMMANDS = {
    "undo": "Undo the last turn: restore the files it changed to how they were before it",
}


def available_commands() -> AvailableCommandsUpdate:
    return AvailableCommandsUpdate(
        session_update="available_commands_update",
        available_commands=[AvailableCommand(name=name, description=text) for name, text in COMMANDS.items()],
    )


def command_in(text: str) -> str | None:
    """The command a prompt's text runs (`/undo`, alone on its line), or None for a turn's instruction."""
    words = text.strip().split()
    if len(words) == 1 and words[0].startswith("/") and words[0][1:] in COMMANDS:
        return words[0][1:]
    return None


async def run(session: AcpSession, name: str) -> str:
    """Run command `name` in `session`; the prompt's stop reason once its answer is out."""
    assert name == "undo"
    remote = await session.open()
    try:
        done = await remote.submit(Undo())
    except UndoError as exc:
        await session.say(str(exc))
        return "end_turn"
    paths = done.paths if isinstance(done, TurnUndone) else []
    if paths:
        await session.say("Undid the last turn. Restored: " + ", ".join(paths))
    else:
        await session.say("Undid the last turn; no file had changed since its checkpoint.")
    return "end_turn"
