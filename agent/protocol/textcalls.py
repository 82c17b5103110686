"""Tool calls as text, for models without native tool calling (the embedded model, many local ones).

The tool schemas go into the system prompt with one precise output format:

    <tool_call>
    {"name": "read_file", "arguments": {"path": "app.py"}}
    </tool_call>

and `parse_reply` reads calls back out of what the model wrote. The parser is generous about form
(JSON objects with or without the tags, fenced blocks, a list of calls, Python-style literals,
`read_file(path="app.py")`, a reply cut off before its closing braces) because a weak model rarely
gets the form exactly right; a reply that plainly tries to call a tool but still cannot be read is
an error whose text restates the exact format, so the model can retry and the failure is recorded.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from importlib import resources
from string import Template
from typing import Any

from agent.protocol.lenient_json import (
    TooDeep,
    Unreadable,
    load_json_at,
    loads_bounded,
    next_open,
    skip_separators,
)

_TAG_NAMES = r"(?:tool_calls?|function_?calls?|tool)"
_TAG_BLOCK = re.compile(rf"<{_TAG_NAMES}\s*>(?P<body>.*?)(?:</{_TAG_NAMES}\s*>|(?=<{_TAG_NAMES}\s*>)|\Z)", re.S | re.I)
_STRAY_TAG = re.compile(rf"</?{_TAG_NAMES}\s*/?>", re.I)
_FENCE = re.compile(r"```[ \t]*(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)(?:```|\Z)", re.S)
_TOOL_FENCE_LANGS = {"tool_call", "tool_calls", "tool", "function_call", "function_calls"}
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARG_KEYS = ("arguments", "parameters", "args", "input")
_JSON_KEY_HINT = re.compile(r'["\'](?:name|arguments|parameters|tool_name)["\']\s*:')


@dataclass(frozen=True)
class ParsedReply:
    content: str | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None


# ---------------------------------------------------------------------------------------------
# Prompt and messages


def tool_prompt(tools: list[dict[str, Any]]) -> str:
    """The system-prompt section that lists the tools and states the output format."""
    functions = [t.get("function", t) for t in tools]
    names = [f["name"] for f in functions]
    done_rule = (
        "When the task is done, call finish. To answer without acting, reply in plain text with no <tool_call> block."
        if "finish" in names
        else "When you are done, reply in plain text with no <tool_call> block."
    )
    return (
        _template("text_tools.md")
        .substitute(
            done_rule=done_rule,
            tools="\n\n".join(_describe_tool(f) for f in functions),
        )
        .strip()
    )


def to_text_messages(messages: list[dict], tools: list[dict]) -> list[dict]:
    """Messages for a model without native tool calls: the tool prompt appended to the system
    message; assistant tool_calls rendered as text in the output format; role=tool results turned
    into user messages that name the call they answer."""
    out: list[dict[str, Any]] = []
    names_by_id: dict[str, str] = {}
    results_at: int | None = None  # index in `out` of the user message holding tool results
    prompt = tool_prompt(tools) if tools else ""
    for message in messages:
        role = message.get("role")
        if role == "system" and prompt and not any(m["role"] == "system" for m in out):
            base = content_text(message.get("content"))
            out.append({"role": "system", "content": f"{base}\n\n{prompt}" if base else prompt})
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            for call in calls:
                names_by_id[call.get("id") or ""] = call["function"]["name"]
            parts = [content_text(message.get("content")).strip(), *(render_call(c) for c in calls)]
            out.append({"role": "assistant", "content": "\n".join(p for p in parts if p)})
        elif role == "tool":
            block = render_result(message, names_by_id)
            if results_at is not None and results_at == len(out) - 1:
                out[-1]["content"] += "\n\n" + block
            else:
                out.append({"role": "user", "content": block})
                results_at = len(out) - 1
            continue
        elif (
            role == "user"
            and results_at is not None
            and results_at == len(out) - 1
            and isinstance(message.get("content"), str)
        ):
            # Some chat templates require user/assistant alternation: keep one user message.
            out[-1]["content"] += "\n\n" + message["content"]
        else:
            out.append(dict(message))
        results_at = None
    if prompt and not any(m["role"] == "system" for m in out):
        out.insert(0, {"role": "system", "content": prompt})
    return out


_CALL_START = re.compile(rf"<{_TAG_NAMES}|```|^[ \t]*[\[{{]", re.M | re.I)
_PARTIAL_START = re.compile(r"(?:<\w*|`{1,2})\Z")


def prose_length(text: str) -> int:
    """How much of a reply still being written is surely prose, not a call: the text before a call
    tag, a fence or a JSON object or list at a line's start, less an end that may still grow into
    one (`<tool`, a backtick, a last line of spaces). A display shows that much while it streams
    and leaves the calls to be shown once parsed."""
    match = _CALL_START.search(text)
    if match is not None:
        return match.start()
    last_line = text[text.rfind("\n") + 1 :]
    if not last_line.strip():
        return len(text) - len(last_line)
    partial = _PARTIAL_START.search(text)
    return partial.start() if partial else len(text)


def render_call(call: dict[str, Any]) -> str:
    """One OpenAI-shape tool call written in the text output format."""
    function = call["function"]
    raw = function.get("arguments") or "{}"
    try:
        arguments = json.dumps(loads_bounded(raw), ensure_ascii=False)
    except (TypeError, ValueError):  # TooDeep is a ValueError
        arguments = raw  # the model's own malformed text, kept as it sent it
    return f"<tool_call>\n{call_object(function['name'], arguments)}\n</tool_call>"


def call_object(name: str, arguments: str) -> str:
    """A call as the one JSON object a model writes: the body of a text-mode block, and the whole of a
    grammar-mode reply. `arguments` is their JSON text."""
    return f'{{"name": {json.dumps(name)}, "arguments": {arguments}}}'


def grammar_kwargs(tools: list[dict]) -> dict:
    """Extra litellm kwargs for the grammar mode (e.g. response_format with a JSON schema).

    The reply is constrained to one JSON call object `{"name": ..., "arguments": {...}}` whose
    arguments follow the named tool's schema, so the model can only act through tools (the turn
    ends with `finish`). `parse_reply` reads the result like any other reply.
    """
    choices = []
    for tool in tools:
        function = tool.get("function", tool)
        choices.append(
            {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "enum": [function["name"]]},
                    "arguments": function.get("parameters") or {"type": "object"},
                },
                "required": ["name", "arguments"],
            }
        )
    schema = choices[0] if len(choices) == 1 else {"anyOf": choices}
    return {"response_format": {"type": "json_schema", "json_schema": {"name": "tool_call", "schema": schema}}}


# ---------------------------------------------------------------------------------------------
# Parsing


def parse_reply(text: str, tool_names: Collection[str], id_prefix: str = "call") -> ParsedReply:
    """ParsedReply(content: str | None, tool_calls: list[dict], error: str | None). tool_calls in
    OpenAI shape: {"id": "<id_prefix>_<n>", "type": "function", "function": {"name": str, "arguments":
    str}} (arguments = JSON text; ids that are the same when the same reply is parsed again, so pass
    a prefix unique in the conversation). error is set (the feedback text, stating the exact expected format)
    when the reply tried to call a tool but could not be parsed; plain prose with no attempt at a
    call is a final answer (content, no calls, no error).

    All or nothing: when any attempted call cannot be read, no call is returned, so that the model
    resends the whole reply rather than half of it running.
    """
    names = set(tool_names)
    found: list[tuple[int, str, str]] = []  # (position, name, arguments JSON)
    spans: list[tuple[int, int]] = []
    problems: list[str] = []

    def take(start: int, end: int, body: str, strict: bool) -> None:
        try:
            calls = _calls_in_block(body, names, strict)
        except Unreadable as exc:
            problems.append(str(exc))
            spans.append((start, end))
            return
        if calls:
            found.extend((start + i, name, args) for i, (name, args) in enumerate(calls))
            spans.append((start, end))

    for match in _TAG_BLOCK.finditer(text):
        take(match.start(), match.end(), _unfence(match.group("body")), strict=True)
    for match in _FENCE.finditer(text):
        if not _overlaps(match.span(), spans):
            lang = match.group("lang").lower()
            take(match.start(), match.end(), match.group("body"), strict=lang in _TOOL_FENCE_LANGS)
    _scan_bare(text, names, spans, found, problems)

    rest = _without(text, spans)
    if not found and not problems:
        problems.extend(_attempt_without_call(rest, names))
    content = _STRAY_TAG.sub("", rest)
    content = re.sub(r"\n{3,}", "\n\n", content).strip() or None
    if problems:
        return ParsedReply(content=content, tool_calls=[], error=call_feedback(problems[0], names))
    ordered = sorted(found, key=lambda f: f[0])
    tool_calls = [_openai_call(f"{id_prefix}_{i}", name, args) for i, (_, name, args) in enumerate(ordered)]
    return ParsedReply(content=content, tool_calls=tool_calls)


def call_feedback(problem: str, tool_names: Collection[str]) -> str:
    """The message a model gets back when its reply could not be read as a tool call."""
    names = sorted(tool_names)
    if "read_file" in names:
        example = '{"name": "read_file", "arguments": {"path": "path/to/file.py"}}'
    elif names:
        example = f'{{"name": {json.dumps(names[0])}, "arguments": {{}}}}'
    else:
        example = '{"name": "TOOL_NAME", "arguments": {}}'
    return (
        _template("text_tools_feedback.md")
        .substitute(problem=problem, example=example, names=", ".join(names) or "(none)")
        .strip()
    )


def _calls_in_block(body: str, names: set[str], strict: bool) -> list[tuple[str, str]]:
    """The calls in one tagged or fenced block. Raises Unreadable when the block cannot be read
    and is plainly meant as a call: `strict` (tool tags), or it has "name"/"arguments" keys."""
    body = body.strip()
    meant = strict or bool(_JSON_KEY_HINT.search(body))
    if not body:
        if strict:
            raise Unreadable("the <tool_call> block is empty")
        return []
    if body[0] not in "{[":
        calls = _python_calls(body, names)
        if calls is None and strict:
            raise Unreadable("the text inside the block is not a JSON object")
        return calls or []
    calls: list[tuple[str, str]] = []
    pos = 0
    while pos < len(body) and body[pos] in "{[":  # text after the last object is ignored
        try:
            value, pos = load_json_at(body, pos)
        except Unreadable:
            if meant:
                raise
            return []
        if not meant and not _looks_like_call(value, names):
            return []
        calls.extend(_calls_in_value(value, names))
        pos = skip_separators(body, pos)
    return calls


def _calls_in_value(value: Any, names: set[str]) -> list[tuple[str, str]]:
    if isinstance(value, list):
        return [call for item in value for call in _calls_in_value(item, names)]
    if not isinstance(value, dict):
        raise Unreadable(f'expected a JSON object with "name" and "arguments", got {json.dumps(value)[:60]}')
    if isinstance(value.get("tool_calls"), list):
        return _calls_in_value(value["tool_calls"], names)
    function = value.get("function")
    if isinstance(function, dict):
        value = {**value, **function}
    name = next((value[k] for k in _NAME_KEYS if isinstance(value.get(k), str)), None)
    arguments = next((value[k] for k in _ARG_KEYS if k in value), None)
    if name is None and len(value) == 1 and next(iter(value)) in names:
        name, arguments = next(iter(value.items()))
    if not name:
        raise Unreadable('the JSON object has no "name" key naming the tool to call')
    name = name.removeprefix("functions.")
    if arguments is None:  # {"name": "read_file", "path": "app.py"}: the rest are the arguments
        arguments = {k: v for k, v in value.items() if k not in (*_NAME_KEYS, "type", "id")}
    if isinstance(arguments, str):
        return [(name, arguments)]  # JSON text as the OpenAI shape sends it; checked when run
    if not isinstance(arguments, dict):
        raise Unreadable(f'"arguments" for {name} must be a JSON object, got {json.dumps(arguments)[:60]}')
    return [(name, json.dumps(arguments, ensure_ascii=False))]


def _scan_bare(
    text: str,
    names: set[str],
    spans: list[tuple[int, int]],
    found: list[tuple[int, str, str]],
    problems: list[str],
) -> None:
    """Calls written without tags or fences: JSON objects and `tool(arg=...)` lines in the prose."""
    pos = 0
    # The next blank line and "name"/"arguments" key, found once and reused, not once per bracket.
    paragraph_end, hint = -1, _JSON_KEY_HINT.search(text)
    while (pos := next_open(text, pos)) >= 0:
        if _inside(pos, spans):
            pos = max(end for start, end in spans if start <= pos < end)
            continue
        try:
            value, end = load_json_at(text, pos)
        except TooDeep as exc:  # no prose nests this deep: one problem, not a rescan from each inner bracket
            problems.append(str(exc))
            spans.append((pos, len(text)))
            break
        except Unreadable as exc:
            if paragraph_end < pos:
                blank = text.find("\n\n", pos)
                paragraph_end = len(text) if blank < 0 else blank
            end = paragraph_end
            if hint is not None and hint.start() < pos:
                hint = _JSON_KEY_HINT.search(text, pos)
            if hint is not None and hint.end() <= end:
                problems.append(str(exc))
                spans.append((pos, end))
                pos = end
            else:
                pos += 1
            continue
        if not _looks_like_call(value, names):
            pos += 1
            continue
        try:
            found.extend((pos + i, name, args) for i, (name, args) in enumerate(_calls_in_value(value, names)))
        except Unreadable as exc:
            problems.append(str(exc))
        spans.append((pos, end))
        pos = end
    if not names:
        return
    line = re.compile(rf"^[ \t]*(?:{'|'.join(map(re.escape, names))})[ \t]*\(.*\)[ \t]*;?[ \t]*$", re.M)
    for match in line.finditer(text):
        if _inside(match.start(), spans):
            continue
        try:
            calls = _python_calls(match.group(), names)
        except Unreadable as exc:
            problems.append(str(exc))
            spans.append(match.span())
            continue
        if calls:
            found.extend((match.start(), name, args) for name, args in calls)
            spans.append(match.span())


def _looks_like_call(value: Any, names: set[str]) -> bool:
    if isinstance(value, list):
        return bool(value) and all(_looks_like_call(v, names) for v in value)
    if not isinstance(value, dict):
        return False
    if isinstance(value.get("tool_calls"), list) or isinstance(value.get("function"), dict):
        return True
    name = next((value[k] for k in _NAME_KEYS if isinstance(value.get(k), str)), None)
    if name is not None:
        return name in names or any(k in value for k in _ARG_KEYS)
    return len(value) == 1 and next(iter(value)) in names


def _attempt_without_call(text: str, names: set[str]) -> list[str]:
    """Problems for a reply that found no call yet plainly tried to make one. Code in fenced
    blocks and `def read_file(` are the model writing code, not calling a tool."""
    prose = _FENCE.sub("", text)
    for name in sorted(names):
        match = re.search(rf"(?<![\w.])(?<!def ){re.escape(name)}\s*[({{]", prose)
        if match:
            return [
                f"it writes {match.group().strip()}... as code; a call must be a JSON object inside <tool_call> tags"
            ]
    if _STRAY_TAG.search(prose):
        return ["it has a <tool_call> tag but no JSON call object inside the tags"]
    return []


def _python_calls(body: str, names: set[str]) -> list[tuple[str, str]] | None:
    """`read_file(path="app.py")` lines, one call per line; None when the body is not that."""
    calls = []
    for line in filter(None, (ln.strip().rstrip(";") for ln in body.splitlines())):
        try:
            node = ast.parse(line, mode="eval").body
        except (SyntaxError, ValueError, MemoryError, RecursionError):  # the parser's own limits: not a call
            return None
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names):
            return None
        if node.args:
            raise Unreadable(
                f"it passes {node.func.id} positional arguments; arguments need their names, as a JSON object"
            )
        try:
            arguments = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
        except (ValueError, TypeError, MemoryError, RecursionError):
            raise Unreadable(
                f"the arguments to {node.func.id} are not plain values (strings, numbers, lists)"
            ) from None
        calls.append((node.func.id, json.dumps(arguments, ensure_ascii=False)))
    return calls or None


# ---------------------------------------------------------------------------------------------
# Small helpers


def _unfence(body: str) -> str:
    """A tagged block's body without the code fence some models put inside the tags."""
    match = re.fullmatch(r"\s*```[\w-]*[ \t]*\n?(.*?)(?:```)?\s*", body, re.S)
    return match.group(1) if match else body


def _openai_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def render_result(message: dict[str, Any], names_by_id: dict[str, str]) -> str:
    """A tool message as the text mode gives it to the model: a `<tool_result>` block."""
    call_id = message.get("tool_call_id") or ""
    name = message.get("name") or names_by_id.get(call_id, "tool")
    return (
        f'<tool_result name="{name}" id="{call_id}">\n{content_text(message.get("content")).rstrip()}\n</tool_result>'
    )


def _describe_tool(function: dict[str, Any]) -> str:
    lines = [f"## {function['name']}"]
    if function.get("description"):
        lines.append(function["description"].strip())
    params = function.get("parameters") or {}
    required = set(params.get("required") or [])
    properties = params.get("properties") or {}
    if properties:
        lines.append("Arguments:")
    for arg, schema in properties.items():
        kind = (
            schema.get("type", "any")
            if set(schema) <= {"type", "description"}
            else json.dumps({k: v for k, v in schema.items() if k != "description"})
        )
        note = f": {schema['description']}" if schema.get("description") else ""
        lines.append(f"- {arg} ({kind}, {'required' if arg in required else 'optional'}){note}")
    return "\n".join(lines)


def content_text(content: Any) -> str:
    """A message's content as text (None: empty; a list of parts: their texts, one per line)."""
    if content is None:
        return ""
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def _template(name: str) -> Template:
    return Template(resources.files("agent").joinpath("prompts", name).read_text(encoding="utf-8"))


def _overlaps(span: tuple[int, int], spans: list[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in spans)


def _inside(pos: int, spans: list[tuple[int, int]]) -> bool:
    return any(start <= pos < end for start, end in spans)


def _without(text: str, spans: list[tuple[int, int]]) -> str:
    kept, last = [], 0
    for start, end in sorted(spans):
        if start >= last:
            kept.append(text[last:start])
            last = end
        else:
            last = max(last, end)
    kept.append(text[last:])
    return "".join(kept)
