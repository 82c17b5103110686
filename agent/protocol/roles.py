"""What a tool's arguments mean, declared where the tool is defined (agent.toolkit.tool): which one
is the call's target, which name paths it reads or writes, which is a command line.

The roles travel with each call (`ToolCallStarted.roles`), so the monitor, pairs, lessons,
corrections and rewards read them instead of guessing from argument names. A call recorded before
calls carried roles gets the roles its built-in tool declared (`builtin_roles`, by tool name: the
only fallback); any other tool without roles (a tool from an MCP server: teachback knows nothing of
what its arguments mean) has none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any


@dataclass(frozen=True)
class Roles:
    """Argument names: `target` (what the call acts on: a path, a command, a pattern), `reads` and
    `writes` (the paths it reads or lists, and those it creates, changes, moves or deletes),
    `command` (a shell command line)."""

    target: str | None = None
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    command: str | None = None

    def names(self) -> set[str]:
        return {n for n in (self.target, self.command, *self.reads, *self.writes) if n is not None}

    def target_of(self, arguments: Mapping[str, Any] | None) -> str | None:
        """The call's target: its target argument's text, when it sent one."""
        return _text(arguments, self.target)

    def command_of(self, arguments: Mapping[str, Any] | None) -> str | None:
        return _text(arguments, self.command)

    def paths_read(self, arguments: Mapping[str, Any] | None) -> list[str]:
        return [p for name in self.reads if (p := _text(arguments, name)) is not None]

    @property
    def target_is_path(self) -> bool:
        return self.target is not None and self.target in (*self.reads, *self.writes)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "reads": list(self.reads), "writes": list(self.writes), "command": self.command}

    @classmethod
    def from_dict(cls, data: Any) -> Roles:
        """Roles from recorded JSON; anything that is not a role list is no role (recorded data is
        read, never trusted)."""
        if not isinstance(data, Mapping):
            return NO_ROLES
        return cls(
            target=_name(data.get("target")),
            reads=_names(data.get("reads")),
            writes=_names(data.get("writes")),
            command=_name(data.get("command")),
        )


NO_ROLES = Roles()


def roles_for(name: str | None, recorded: Any = None) -> Roles:
    """A call's roles: those recorded with it, else (a call recorded before calls carried them) the
    roles its built-in tool declares, else none."""
    if recorded is not None:
        return Roles.from_dict(recorded)
    return builtin_roles().get(name or "", NO_ROLES)


@cache
def builtin_roles() -> dict[str, Roles]:
    """The built-in tools' declared roles, by name (written from agent.tools by
    `python -m agent.tools`; a test checks that the file and the declarations agree)."""
    text = resources.files("agent.protocol").joinpath("builtin_roles.json").read_text(encoding="utf-8")
    return {name: Roles.from_dict(data) for name, data in json.loads(text).items()}


def _text(arguments: Mapping[str, Any] | None, name: str | None) -> str | None:
    value = arguments.get(name) if name is not None and isinstance(arguments, Mapping) else None
    return value if isinstance(value, str) and value else None


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _names(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str) and v) if isinstance(value, list | tuple) else ()
