"""Tools as typed Python functions: schemas derived from signatures and docstrings, arguments
checked against them, and every failure turned into a result written for the model."""

from __future__ import annotations

import inspect
import json
import math
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agent.protocol import LONE_SURROGATE
from agent.protocol.arguments import Arguments, json_type, read_arguments
from agent.protocol.roles import NO_ROLES, Roles
from agent.workspace import FileChange
from common.text import clip

Action = Literal["read", "edit", "command", "call", "finish"]  # call: a tool from an MCP server
MAX_SAFE_INTEGER = 2**53 - 1  # the integers every JSON reader agrees on
QUOTED_CHARS = 80  # of a name the model sent, quoted back to it (the original may be megabytes)

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


@dataclass
class ToolResult:
    """What a tool call produced. `error_kind` set means it failed; `output` is what the model reads."""

    output: str
    error_kind: str | None = None
    # The call's declared target in its resolved form (a path relative to the workspace root); left
    # None, the session sets the target argument's value as sent.
    target: str | None = None
    changes: list[FileChange] = field(default_factory=list)
    exit_code: int | None = None  # run_command's exit status, when the command ran to its end

    @property
    def ok(self) -> bool:
        return self.error_kind is None


def error(message: str, kind: str = "failed", target: str | None = None) -> ToolResult:
    return ToolResult(output=message, error_kind=kind, target=target)


@dataclass(frozen=True)
class Shown:
    """How a call of a tool reads to a person (an editor's agent panel): its kind (the Agent Client
    Protocol's tool kinds: read, search, edit, delete, move, execute; other when none is declared),
    its title made from the arguments sent, and which argument is a line of the file it acts on."""

    kind: str = "other"
    title: Callable[[Mapping[str, Any]], str] | None = None
    line: str | None = None

    def of(self, action: str, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """What `ToolCallStarted.shown` carries for a call with `arguments` of a tool that declares
        `action` (see agent.protocol)."""
        args = arguments if isinstance(arguments, Mapping) else {}
        line = args.get(self.line) if self.line is not None else None
        return {
            "action": action,
            "kind": self.kind,
            "title": self.title(args) if self.title is not None else None,
            "line": line if isinstance(line, int) and not isinstance(line, bool) else None,
        }


NOT_SHOWN = Shown()


@dataclass(frozen=True)
class Param:
    name: str
    py_type: type
    required: bool
    description: str


@dataclass(frozen=True)
class Tool:
    name: str
    fn: Callable[..., Any]
    action: Action
    description: str
    params: tuple[Param, ...]
    roles: Roles = NO_ROLES
    shown: Shown = NOT_SHOWN

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    def schema(self) -> dict[str, Any]:
        properties = {p.name: {"type": _JSON_TYPES[p.py_type], "description": p.description} for p in self.params}
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": properties,
                    "required": [p.name for p in self.params if p.required],
                    "additionalProperties": False,
                },
            },
        }

    def signature_text(self) -> str:
        args = ", ".join(f"{p.name}: {_JSON_TYPES[p.py_type]}" + ("" if p.required else "?") for p in self.params)
        return f"{self.name}({args})"

    def check(self, arguments: dict[str, Any]) -> list[str]:
        """What is wrong with `arguments` for this tool (nothing: an empty list)."""
        return _check_arguments(self, arguments)

    def parameters_text(self) -> str:
        return "\n".join(
            f"- {p.name} ({_JSON_TYPES[p.py_type]}{'' if p.required else ', optional'}): {p.description}"
            for p in self.params
        )


class ModelTool(Protocol):
    """What a session needs of a tool the model may call: a built-in `Tool`, or a tool from an MCP
    server (agent.mcp.tools.McpTool). `fn(context, **arguments)` runs it."""

    name: str
    action: Action
    description: str
    roles: Roles  # what its arguments mean (agent.protocol.roles); none for an MCP server's tool
    shown: Shown  # how a call of it reads to a person; nothing declared for an MCP server's tool

    @property
    def fn(self) -> Callable[..., Any]: ...

    @property
    def is_async(self) -> bool: ...

    def schema(self) -> dict[str, Any]: ...

    def signature_text(self) -> str: ...

    def check(self, arguments: dict[str, Any]) -> list[str]: ...

    def parameters_text(self) -> str: ...


def tool(
    action: Action,
    *,
    target: str | None = None,
    reads: tuple[str, ...] = (),
    writes: tuple[str, ...] = (),
    command: str | None = None,
    kind: str = "other",
    title: Callable[[Mapping[str, Any]], str] | None = None,
    line: str | None = None,
) -> Callable[[Callable[..., Any]], Tool]:
    """Make a Tool from `fn(ctx, **params)`: its schema comes from the annotations and docstring,
    what its arguments mean from the roles declared here (each one a parameter's name), and how a
    call of it reads to a person from `kind`, `title` and `line` (agent.toolkit.Shown)."""
    roles = Roles(target, tuple(reads), tuple(writes), command)
    shown = Shown(kind, title, line)

    def wrap(fn: Callable[..., Any]) -> Tool:
        hints = typing.get_type_hints(fn)
        doc = inspect.getdoc(fn) or ""
        summary, arg_docs = _parse_docstring(doc)
        params = []
        for name, parameter in list(inspect.signature(fn).parameters.items())[1:]:  # skip ctx
            py_type, optional = _unwrap_optional(hints[name])
            if py_type not in _JSON_TYPES:
                raise TypeError(f"tool {fn.__name__}: parameter {name} has unsupported type {py_type}")
            if name not in arg_docs:
                raise TypeError(f"tool {fn.__name__}: parameter {name} is not documented")
            required = parameter.default is inspect.Parameter.empty and not optional
            params.append(Param(name, py_type, required, arg_docs[name]))
        unknown = (roles.names() | ({line} if line else set())) - {p.name for p in params}
        if unknown:
            raise TypeError(f"tool {fn.__name__}: roles name no parameter: {', '.join(sorted(unknown))}")
        return Tool(fn.__name__, fn, action, summary, tuple(params), roles, shown)

    return wrap


@dataclass(frozen=True)
class ServedTools:
    """What a session's tool servers offer once started (agent.mcp): their tools, why some name
    prefixes have none (a server that did not start: name prefix -> the text the model reads), and
    notices for the user."""

    tools: tuple[ModelTool, ...] = ()
    unavailable: Mapping[str, str] = field(default_factory=dict)
    notices: tuple[str, ...] = ()


class ToolServers(Protocol):
    """Tools from outside the agent (agent.mcp.servers.McpServers): started once, before the first
    turn, and closed with the session."""

    async def start(self) -> ServedTools: ...

    async def close(self) -> None: ...


class Toolbox:
    def __init__(self, tools: Iterable[ModelTool], unavailable: Mapping[str, str] | None = None) -> None:
        self._tools: dict[str, ModelTool] = {t.name: t for t in tools}
        self._schemas = [t.schema() for t in self._tools.values()]
        # name prefix -> why no tool of that prefix exists (an MCP server that could not be started)
        self._unavailable = dict(unavailable or {})

    def extended(self, tools: Iterable[ModelTool], unavailable: Mapping[str, str] | None = None) -> Toolbox:
        """These tools and `tools` (tools from MCP servers), and why some prefixes have none."""
        return Toolbox([*self._tools.values(), *tools], {**self._unavailable, **(unavailable or {})})

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        return self._schemas

    def get(self, name: str) -> ModelTool | None:
        return self._tools.get(name)

    def roles(self, name: str) -> Roles:
        """What the named tool's arguments mean (none for a tool it does not have)."""
        found = self._tools.get(name)
        return found.roles if found is not None else NO_ROLES

    def shown(self, name: str, arguments: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """How a call of the named tool with `arguments` reads to a person (None for a tool it does
        not have)."""
        found = self._tools.get(name)
        return found.shown.of(found.action, arguments) if found is not None else None

    def available(self) -> str:
        """One line per tool (an MCP server's long description cut to its first line, 200 characters)."""
        return "\n".join(f"- {t.signature_text()}: {_summary(t.description)}" for t in self._tools.values())

    def prepare(self, name: str, arguments: Arguments | str) -> tuple[ModelTool, dict[str, Any]] | ToolResult:
        """The tool and checked arguments for a call (read by `read_arguments`, or raw text to read
        here), or a schema-error result for the model."""
        found = self._tools.get(name)
        why = next((why for prefix, why in self._unavailable.items() if name.startswith(prefix)), None)
        if found is None and why is not None:
            return error(why, "unavailable")
        if found is None:
            return error(
                f"There is no tool named {clip(name, QUOTED_CHARS, '...')!r}. Call one of the available tools instead:\n"
                f"{self.available()}",
                "unknown_tool",
            )
        checked = _parse_arguments(found, read_arguments(arguments) if isinstance(arguments, str) else arguments)
        if isinstance(checked, ToolResult):
            return checked
        problems = found.check(checked)
        if problems:
            return error(
                f"The arguments for {found.name} do not match its schema:\n"
                + "\n".join(f"- {p}" for p in problems)
                + f"\nExpected: {found.signature_text()}\nParameters:\n"
                + found.parameters_text(),
                "bad_arguments",
            )
        return found, checked


def _parse_arguments(found: ModelTool, arguments: Arguments) -> dict[str, Any] | ToolResult:
    """The arguments object, or the result that says why the model's text could not be one."""
    if arguments.value is not None:
        return arguments.value
    hint = f"{arguments.hint} " if arguments.hint else ""
    return error(
        f"The arguments for {found.name} {arguments.problem}. {hint}Expected: {found.signature_text()}",
        arguments.kind or "malformed_json",
    )


def split_lines(text: str) -> list[str]:
    """The lines of `text` as editors, git and edit_file number them: split at "\\n" only (a trailing
    "\\r" stays). str.splitlines also splits at \\v, \\f, \\x1c-\\x1e, \\x85, U+2028 and U+2029."""
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def _check_arguments(found: Tool, arguments: dict[str, Any]) -> list[str]:
    problems = []
    known = {p.name: p for p in found.params}
    for name in arguments:
        if name not in known:
            problems.append(
                f"unknown argument {clip(name, QUOTED_CHARS, '...')!r} (known: {', '.join(known) or 'none'})"
            )
    for param in found.params:
        if param.name not in arguments or arguments[param.name] is None:
            if param.required:
                problems.append(f"missing required argument {param.name!r}")
            continue
        value = arguments[param.name]
        if not _matches(value, param.py_type):
            problems.append(
                f"{param.name!r} must be {_JSON_TYPES[param.py_type]}, got {json_type(value)} {_preview(value)}"
            )
        elif problem := value_problem(value):
            problems.append(f"{param.name!r} {problem}")
    return problems


def value_problem(value: Any) -> str | None:
    """What makes a well-typed value unusable: text no file system or process can take, a number
    outside what every JSON reader agrees on."""
    if isinstance(value, str) and (surrogate := LONE_SURROGATE.search(value)):
        return (
            f"holds a lone UTF-16 surrogate ({ascii(surrogate.group())[1:-1]} at character {surrogate.start()}), "
            "which is not a Unicode character and cannot be written to a file or a path. Send the real "
            "characters, or both halves of an escaped pair such as \\ud83d\\ude00."
        )
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value}"
    if abs(value) > MAX_SAFE_INTEGER:
        return f"is out of range: use a number between -{MAX_SAFE_INTEGER:,} and {MAX_SAFE_INTEGER:,}"
    return None


def _matches(value: Any, py_type: type) -> bool:
    if py_type is bool:
        return isinstance(value, bool)
    if py_type is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if py_type is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, py_type)


def _preview(value: Any) -> str:
    return clip(json.dumps(value), 40, "...")


def _summary(description: str) -> str:
    line = description.strip().split("\n", 1)[0]
    return clip(line, 200, "...")


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], True
    return hint, False


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(summary, {arg: description}) from a Google-style docstring."""
    summary_part, _, args_part = doc.partition("\nArgs:\n")
    summary = " ".join(summary_part.split())
    arg_docs: dict[str, str] = {}
    current = None
    for line in args_part.splitlines():
        match = re.match(r"^\s{2,}(\w+):\s*(.*)$", line)
        if match and (current is None or len(line) - len(line.lstrip()) <= 4):
            current = match.group(1)
            arg_docs[current] = match.group(2).strip()
        elif current and line.strip():
            arg_docs[current] += " " + line.strip()
    return summary, arg_docs
