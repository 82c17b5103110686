"""The two views of a conversation an export can carry.

- canonical: OpenAI / Hugging Face chat shape. `content` is always a string; a tool call's
  `arguments` is a dict when the model's JSON parses to an object, else the raw text it sent; an
  assistant message of a text-mode model keeps only its prose in `content` (the calls are in
  `tool_calls`, not written twice).
- text: what a model without native tool calls is given (agent.protocol.textcalls): the tool schemas in
  the system prompt, calls written out as text, tool results as user turns. For a session recorded
  in the text or grammar tool mode this is exactly what the model saw.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.protocol import textcalls
from agent.protocol.arguments import arguments_or_text

Message = dict[str, Any]
TEMPLATES = ("auto", "native", "text")


class Memo:
    """Results per object (a message), for the pairs of one session, whose prompts share their
    messages. It holds each object, so an id cannot be reused while its result is kept. With a
    `limit`, it forgets every result when it holds that many (a very long session's)."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.items: dict[int, tuple[Any, Any]] = {}
        # per kind of list: the last list given to `each`, its items' ids and its results
        self.prefixes: dict[str, tuple[list[Any], list[int], list[Any]]] = {}

    def get(self, obj: Any, make: Callable[[Any], Any]) -> Any:
        hit = self.items.get(id(obj))  # one lookup on a hit: this runs for every message of every record
        if hit is not None and hit[0] is obj:
            return hit[1]
        result = make(obj)
        if self.limit is not None and len(self.items) >= self.limit:
            self.items.clear()
        self.items[id(obj)] = (obj, result)
        return result

    def each(self, objs: list[Any], make: Callable[[Any], Any], kind: str = "") -> list[Any]:
        """`[self.get(o, make) for o in objs]`. The lists of one `kind` (the prompts of a session's
        records) mostly extend the one given before: its items are recognised by identity, only
        the rest are looked up. (Equal ids are the same object: the items of both lists are alive.)"""
        seen, seen_ids, results = self.prefixes.setdefault(kind, ([], [], []))
        ids = list(map(id, objs))
        n = len(seen_ids)
        if ids[:n] != seen_ids:  # not an extension: the longest common prefix, by halves
            low, high = 0, min(n - 1, len(ids))
            while low < high:
                middle = (low + high + 1) // 2
                low, high = (middle, high) if ids[:middle] == seen_ids[:middle] else (low, middle - 1)
            n = low
        del seen[n:], seen_ids[n:], results[n:]
        for obj in objs[n:]:
            seen.append(obj)
            results.append(self.get(obj, make))
        seen_ids.extend(ids[n:])
        return results[:]

    def has(self, obj: Any) -> bool:
        hit = self.items.get(id(obj))
        return hit is not None and hit[0] is obj

    def put(self, obj: Any, result: Any) -> None:
        self.items[id(obj)] = (obj, result)


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    return [t.get("function", t).get("name", "") for t in tools]


def parse_arguments(raw: Any) -> dict[str, Any] | str:
    """A call's arguments as a dict when they read as a JSON object within the agent's bounds, else
    the raw text as sent (agent.protocol.arguments: the one reader of a model's argument text)."""
    return arguments_or_text(raw)


def canonical_call(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    return {
        "id": call.get("id") or "",
        "type": "function",
        "function": {"name": function.get("name") or "", "arguments": parse_arguments(function.get("arguments"))},
    }


def canonical_message(message: Message, names: list[str]) -> Message:
    role = message.get("role") or "user"
    content = textcalls.content_text(message.get("content"))
    out: Message = {"role": role, "content": content}
    calls = message.get("tool_calls") or []
    if role == "assistant" and calls:
        parsed = textcalls.parse_reply(content, names) if content else None
        if parsed is not None and parsed.tool_calls:
            content = parsed.content or ""  # the raw call text is not kept a second time
        out = {"role": role, "content": content, "tool_calls": [canonical_call(c) for c in calls]}
    elif role == "tool":
        out["tool_call_id"] = message.get("tool_call_id") or ""
    return out


def canonical(messages: list[Message], tools: list[dict[str, Any]], memo: Memo | None = None) -> list[Message]:
    names = tool_names(tools)
    if memo is None:
        return [canonical_message(m, names) for m in messages]

    def make(m: Message) -> Message:
        return canonical_message(m, names)

    return memo.each(messages, make, "canonical")


def as_sent(messages: list[Message]) -> list[Message]:
    """The conversation as the text and grammar modes send it (agent.model): an assistant message
    with content keeps it as written, calls included, so the calls are not rendered twice."""
    return [
        {"role": "assistant", "content": m["content"]} if m.get("role") == "assistant" and m.get("content") else m
        for m in messages
    ]


def text_view(messages: list[Message], tools: list[dict[str, Any]]) -> list[Message]:
    """The messages a text-mode model is given for this conversation."""
    return [
        {"role": m["role"], "content": textcalls.content_text(m.get("content"))}
        for m in textcalls.to_text_messages(as_sent(messages), tools)
    ]


def text_reply(message: Message, style: str, like: str | None = None) -> Message:
    """An assistant message as a text-mode model writes it. A recorded reply keeps its own text; a
    derived one is written as the session's model wrote calls: `style` "json", a bare JSON call
    object (the grammar and json_object modes), or "text", a <tool_call> block, its JSON spaced as
    in `like` (a reply that model wrote in the session; json.dumps spacing without one)."""
    raw = textcalls.content_text(message.get("content"))
    calls = message.get("tool_calls") or []
    if raw and (not calls or textcalls.parse_reply(raw, [c["function"]["name"] for c in calls]).tool_calls):
        return {"role": "assistant", "content": raw}
    spacing = call_spacing(like)
    parts = [raw.strip()] if raw.strip() else []
    for call in calls:
        function = call["function"]
        arguments = function["arguments"]
        if isinstance(arguments, dict):
            text = spaced_json({"name": function["name"], "arguments": arguments}, spacing)
            parts.append(text if style == "json" else f"<tool_call>\n{text}\n</tool_call>")
        else:  # text that is not a JSON object: kept as the model sent it
            parts.append(textcalls.render_call({"function": {"name": function["name"], "arguments": arguments}}))
    return {"role": "assistant", "content": "\n".join(parts)}


@dataclass(frozen=True)
class Spacing:
    """How a model spaces the JSON of a call, as (after `{`, before `}`, after `:`, after `,`), for
    the call object and for the objects and lists inside it. The default is json.dumps's."""

    outer: tuple[str, str, str, str] = ("", "", " ", " ")
    inner: tuple[str, str, str, str] = ("", "", " ", " ")


PLACES = {"{": 0, "}": 1, ":": 2, ",": 3}  # a Spacing tuple's index for each structural character


def call_spacing(sample: str | None) -> Spacing:
    """The spacing of the first JSON object in `sample`, a reply the model wrote: the first
    whitespace seen at each place, at the top level and below it. Layouts over several lines are
    not imitated (the default is returned)."""
    text = sample or ""
    start = text.find("{")
    if start < 0:
        return Spacing()
    seen: dict[tuple[int, int], str] = {}
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        char = text[i]
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        if not in_string and char in PLACES:
            if char == "}":
                gap = text[len(text[:i].rstrip()) : i]
            else:
                rest = text[i + 1 :]
                gap = rest[: len(rest) - len(rest.lstrip())]
            seen.setdefault((min(depth, 2), PLACES[char]), gap)
        if not in_string and char in "}]":
            depth -= 1
            if depth == 0:
                break
    if any("\n" in gap for gap in seen.values()):
        return Spacing()
    outer = tuple(seen.get((1, k), Spacing.outer[k]) for k in range(4))
    inner = tuple(seen.get((2, k), outer[k]) for k in range(4))
    return Spacing(outer=outer, inner=inner)  # type: ignore[arg-type]


def spaced_json(value: Any, spacing: Spacing, depth: int = 1) -> str:
    """`value` as JSON, spaced as `spacing` says (strings escaped as json.dumps does, non-ASCII kept)."""
    opening, closing, colon, comma = spacing.outer if depth == 1 else spacing.inner
    if isinstance(value, dict) and value:
        items = (
            json.dumps(k, ensure_ascii=False) + ":" + colon + spaced_json(v, spacing, depth + 1)
            for k, v in value.items()
        )
        return "{" + opening + ("," + comma).join(items) + closing + "}"
    if isinstance(value, list) and value:
        return "[" + ("," + comma).join(spaced_json(v, spacing, depth + 1) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def fold_tool_results(messages: list[Message]) -> list[Message]:
    """A prompt that ends with tool results, ending with one user turn instead: the trailing tool
    messages become one user message holding each result as
    `<tool_result name="NAME" id="CALL_ID">\\nTEXT\\n</tool_result>`, blank-line separated (the form
    the text mode uses). Earlier tool messages are left as they are."""
    start = len(messages)
    while start > 0 and messages[start - 1].get("role") == "tool":
        start -= 1
    if start == len(messages):
        return messages
    names = {c.get("id"): c["function"]["name"] for m in messages[:start] for c in m.get("tool_calls") or []}
    blocks = [textcalls.render_result(m, names) for m in messages[start:]]
    return [*messages[:start], {"role": "user", "content": "\n\n".join(blocks)}]


def compact_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool schemas for small models: each description cut to its first sentence, argument
    descriptions and `additionalProperties` left out; names, types and `required` kept."""
    out = []
    for tool in tools:
        function = tool.get("function", tool)
        params = function.get("parameters") or {}
        properties = {
            name: {k: v for k, v in schema.items() if k != "description"}
            for name, schema in (params.get("properties") or {}).items()
        }
        compact = {"type": "object", "properties": properties}
        if params.get("required"):
            compact["required"] = params["required"]
        out.append(
            {
                "type": "function",
                "function": {
                    "name": function.get("name"),
                    "description": first_sentence(function.get("description") or ""),
                    "parameters": compact,
                },
            }
        )
    return out


def first_sentence(text: str) -> str:
    match = re.match(r"(.+?[.!?])(\s|$)", text.strip(), re.S)
    return (match.group(1) if match else text.strip()).replace("\n", " ")
