"""A tool from an MCP server as the model sees it: named mcp__<server>__<tool>, with the server's
description and input schema; arguments checked against that schema before the call; the result's
content (text, images as placeholders, resources) as one text, capped like run_command's output."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from agent.protocol import MCP_PREFIX
from agent.protocol.roles import NO_ROLES, Roles
from agent.toolkit import NOT_SHOWN, Action, Shown, ToolResult, value_problem
from agent.tools.commands import cap_output
from common.text import clip

log = logging.getLogger(__name__)
MAX_NAME = 64  # what OpenAI-style function names allow (^[a-zA-Z0-9_-]{1,64}$)
MAX_DESCRIPTION = 4_000  # a server's description goes into every request: a runaway one is cut
MAX_PROBLEMS = 8
MAX_PROBLEM_CHARS = 200
MAX_PARAMETER_CHARS = 300


def tool_name(server: str, remote: str, taken: set[str]) -> str:
    """mcp__<server>__<tool>, in the characters and length function names allow, unique in `taken`."""
    base = f"{MCP_PREFIX}{server}__{re.sub(r'[^A-Za-z0-9_-]', '_', remote)}"
    name = base
    if len(base) > MAX_NAME or base in taken:
        suffix = "_" + hashlib.sha256(remote.encode()).hexdigest()[:8]
        name = base[: MAX_NAME - len(suffix)] + suffix
    taken.add(name)
    return name


@dataclass(frozen=True, eq=False)
class McpTool:
    """One server tool (agent.toolkit.ModelTool). `call(tool, arguments)` runs it on its server."""

    name: str
    server: str
    remote_name: str  # the server's own name for it
    description: str
    input_schema: dict[str, Any]
    call: Callable[[McpTool, dict[str, Any]], Awaitable[ToolResult]]
    action: Action = "call"
    # teachback cannot know what a server's arguments mean: no target, no paths, no command line
    roles: Roles = NO_ROLES
    shown: Shown = NOT_SHOWN

    @classmethod
    def from_listing(cls, server: str, listed: Any, taken: set[str], call: Callable[..., Any]) -> McpTool:
        """From a tool in the server's tools/list answer (mcp.types.Tool)."""
        schema = dict(listed.input_schema) if isinstance(listed.input_schema, dict) else {}
        schema.setdefault("type", "object")
        if schema.get("type") == "object":
            schema.setdefault("properties", {})
        description = (listed.description or "").strip() or f"{listed.name}, a tool of the MCP server {server}."
        description = clip(description, MAX_DESCRIPTION, "...")
        return cls(tool_name(server, listed.name, taken), server, listed.name, description, schema, call)

    @property
    def is_async(self) -> bool:
        return True

    @property
    def fn(self) -> Callable[..., Awaitable[ToolResult]]:
        async def run(_context: Any, /, **arguments: Any) -> ToolResult:
            return await self.call(self, arguments)

        return run

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.input_schema},
        }

    def signature_text(self) -> str:
        required = set(self._required)
        args = ", ".join(
            f"{name}: {_type_name(spec)}" + ("" if name in required else "?") for name, spec in self._properties.items()
        )
        return f"{self.name}({args})"

    def parameters_text(self) -> str:
        required = set(self._required)
        lines = []
        for name, spec in self._properties.items():
            about = str(spec.get("description") or "") if isinstance(spec, dict) else ""
            about = clip(about, MAX_PARAMETER_CHARS, "...")
            optional = "" if name in required else ", optional"
            lines.append(f"- {name} ({_type_name(spec)}{optional})" + (f": {about}" if about else ""))
        return "\n".join(lines) or "(none: send {})"

    def check(self, arguments: dict[str, Any]) -> list[str]:
        """What is wrong with `arguments` by the server's input schema (its JSON Schema), and any
        value no server can be sent (a lone surrogate, a number beyond what JSON readers agree on)."""
        problems = [f"{_where(path)} {problem}" for path, problem in _value_problems(arguments, ())]
        validator = self._validator
        if validator is None:
            return problems
        try:
            errors = sorted(validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.absolute_path])
        except Exception:  # a schema the validator cannot follow ($ref elsewhere): the server checks
            log.warning("cannot check arguments of %s against its schema", self.name, exc_info=True)
            return problems
        for found in errors[:MAX_PROBLEMS]:
            problems.append(f"{_where(tuple(found.absolute_path))} {clip(found.message, MAX_PROBLEM_CHARS, '...')}")
        if len(errors) > MAX_PROBLEMS:
            problems.append(f"({len(errors) - MAX_PROBLEMS} more problems not shown)")
        return problems

    @property
    def _properties(self) -> dict[str, Any]:
        properties = self.input_schema.get("properties")
        return properties if isinstance(properties, dict) else {}

    @property
    def _required(self) -> list[str]:
        required = self.input_schema.get("required")
        return [r for r in required if isinstance(r, str)] if isinstance(required, list) else []

    @cached_property
    def _validator(self) -> Any:
        """A JSON Schema validator of the schema's own draft, or None when the schema is not one."""
        import jsonschema  # the mcp library's dependency, loaded with it

        try:
            cls = jsonschema.validators.validator_for(self.input_schema, default=jsonschema.Draft202012Validator)
            cls.check_schema(self.input_schema)
            return cls(self.input_schema)
        except Exception:  # an invalid schema from the server: calls go unchecked, the server checks
            log.warning("the MCP tool %s has an invalid input schema; its arguments are not checked", self.name)
            return None


def _where(path: tuple[Any, ...]) -> str:
    return f"{'.'.join(str(p) for p in path)!r}:" if path else "the arguments:"


def _value_problems(value: Any, path: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _value_problems(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _value_problems(item, (*path, index))
    elif (problem := value_problem(value)) is not None:
        yield path, problem


def _type_name(spec: Any) -> str:
    if not isinstance(spec, dict):
        return "any"
    if "enum" in spec and isinstance(spec["enum"], list):
        return "one of " + ", ".join(json.dumps(v) for v in spec["enum"][:10])
    kind = spec.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "array" and isinstance(spec.get("items"), dict):
        return f"array of {_type_name(spec['items'])}"
    if isinstance(kind, str):
        return kind
    for key in ("anyOf", "oneOf"):
        if isinstance(spec.get(key), list):
            return " | ".join(_type_name(s) for s in spec[key])
    return "any"


def result_text(result: Any) -> str:
    """A CallToolResult's content as the text the model reads: text as is, images and audio as a
    placeholder, resources with their URI (text shown, binary as a placeholder), structured content
    when there is nothing else; capped."""
    parts = [_block_text(block) for block in result.content or []]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, indent=2, default=str))
    return cap_output("\n".join(parts)) if parts else "(the tool returned no content)"


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        return f"[{kind}: {block.mime_type}, {_decoded_size(block.data):,} bytes; not shown to you]"
    if kind == "resource_link":
        about = ", ".join(str(v) for v in (block.name, block.mime_type) if v)
        return f"[resource link: {block.uri}" + (f" ({about})" if about else "") + "]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if text is not None:
            return f"[resource {resource.uri}]\n{text}"
        mime = resource.mime_type or "binary"
        return f"[resource {resource.uri}: {mime}, {_decoded_size(resource.blob):,} bytes; not shown to you]"
    return f"[{kind or 'unknown'} content; not shown to you]"


def _decoded_size(data: str) -> int:
    """The bytes a base64 text holds (without decoding it)."""
    return len(data.strip().rstrip("=")) * 3 // 4
