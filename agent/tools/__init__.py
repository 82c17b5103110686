"""The agent's tools. Names and argument names are a public interface: scripts, exports and trained
models depend on them."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import agent.protocol
from agent.toolkit import Toolbox
from agent.tools.commands import run_command
from agent.tools.context import ToolContext
from agent.tools.edits import create_file, delete_file, edit_file, move_file
from agent.tools.files import list_files, read_file, search
from agent.tools.meta import finish, repo_map, session_diff

ALL_TOOLS = (
    read_file,
    list_files,
    search,
    edit_file,
    create_file,
    delete_file,
    move_file,
    run_command,
    session_diff,
    repo_map,
    finish,
)


def default_toolbox() -> Toolbox:
    return Toolbox(ALL_TOOLS)


@cache
def _builtin_toolbox() -> Toolbox:
    return default_toolbox()


def shown_for(name: str, arguments: dict[str, Any] | None) -> dict[str, Any] | None:
    """How a call of the named built-in tool reads to a person (agent.toolkit.Shown), for an event
    recorded before calls carried it; None for any other name."""
    return _builtin_toolbox().shown(name, arguments)


def builtin_roles_json() -> str:
    """The built-in tools' declared roles by name, as agent/protocol/builtin_roles.json holds them."""
    return json.dumps({t.name: t.roles.to_dict() for t in ALL_TOOLS}, indent=1, sort_keys=True) + "\n"


def builtin_roles_path() -> Path:
    return Path(agent.protocol.__file__).with_name("builtin_roles.json")


__all__ = ["ALL_TOOLS", "ToolContext", "default_toolbox", "shown_for"]
