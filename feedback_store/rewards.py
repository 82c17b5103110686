"""A reward for tool calls, checked against the recorded tool schemas and the failure's feedback.

Two entry points over one scorer:

- TRL: `reward_funcs=[feedback_store.rewards.tool_call_reward]`. TRL calls it with the prompts,
  the sampled completions and every other dataset column as a keyword list; it reads the
  `ground_truth` column of the trl-sdpo export.
- verl: `custom_reward_function.path=<this file> custom_reward_function.name=compute_score`; verl
  calls `compute_score(data_source, solution_str, ground_truth, extra_info)` with the row's
  `reward_model.ground_truth`.

`ground_truth` is JSON: {"failed": call, "expected": call or null, "feedback": str, "error_kind":
str, "tools": {name: parameters schema}, "roles": {name: roles} (optional)}, a call being {"name":
str, "arguments": object or text}. A call's target is the argument its tool's roles name
(agent.protocol.roles; without "roles", the built-in tools' by name).

Scores: 1.0 the expected call; 0.75 the expected tool on the same target; 0.5 another valid call;
0.25 a known tool with arguments its schema refuses; 0.0 no call, an unknown tool, or the failed
call again (or the part of it the feedback refused: the same missing path, the same unmatched
old_text, the same failing command).

Standard library only, so verl can load this file by its path on workers without teachback.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.protocol.arguments import value_or_text
from agent.protocol.lenient_json import TooDeep, check_depth
from agent.protocol.roles import Roles, roles_for

EXPECTED, SAME_TARGET, VALID, BAD_ARGUMENTS, WRONG = 1.0, 0.75, 0.5, 0.25, 0.0
# What a failure of this kind was about: a role of the failed call's tool (its target: the path that
# was wrong; its command: the command that failed), and for edit_file's no_match the old_text that
# did not match. Sending them again repeats the mistake.
REFUSED = {
    "not_found": ("target",),
    "no_match": ("target", "old_text"),
    "ambiguous": ("target", "old_text"),
    "exists": ("target",),
    "outside_workspace": ("target",),
    "exit_status": ("command",),
}
_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list, "object": dict}


def tool_call_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float]:
    """TRL reward function: one score per completion, from the `ground_truth` column."""
    truths = kwargs.get("ground_truth") or [None] * len(completions)
    return [score(completion, truth) for completion, truth in zip(completions, truths, strict=True)]


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None, **kwargs: Any
) -> float:
    """verl's custom reward function for teachback rows (data_source "teachback/<source>")."""
    if not str(data_source).startswith("teachback"):
        raise NotImplementedError(f"teachback's compute_score scores teachback rows only, not {data_source!r}")
    return score(solution_str, ground_truth)


def score(completion: Any, ground_truth: Any) -> float:
    truth = json.loads(ground_truth) if isinstance(ground_truth, str) and ground_truth else (ground_truth or {})
    calls = calls_in(completion)
    if not calls:
        return WRONG
    call = calls[0]
    schemas = truth.get("tools") or {}
    if schemas and call["name"] not in schemas:
        return WRONG
    if not isinstance(call["arguments"], dict) or (
        schemas and schema_problem(call["arguments"], schemas[call["name"]])
    ):
        return BAD_ARGUMENTS
    roles = roles_for(call["name"], (truth.get("roles") or {}).get(call["name"]))
    if _repeats_failure(call, truth.get("failed"), truth.get("error_kind"), roles):
        return WRONG
    expected = _as_call(truth.get("expected"))
    if expected is not None and call["name"] == expected["name"]:
        if call["arguments"] == expected["arguments"]:
            return EXPECTED
        target = _target(call, roles)
        if target is not None and target == _target(expected, roles):
            return SAME_TARGET
    return VALID


def calls_in(completion: Any) -> list[dict[str, Any]]:
    """The tool calls in a completion: a string, an assistant message, or a list of messages."""
    if isinstance(completion, list):
        replies = [m for m in completion if isinstance(m, dict) and m.get("role", "assistant") == "assistant"]
        return calls_in(replies[-1]) if replies else []
    if isinstance(completion, dict):
        native = [_as_call(c.get("function", c)) for c in completion.get("tool_calls") or []]
        if native:
            return [c for c in native if c is not None]
        completion = completion.get("content") or ""
    if not isinstance(completion, str):
        return []
    bodies = _TAG.findall(completion) or [completion]
    return [call for body in bodies for call in _json_calls(body)]


def schema_problem(arguments: dict[str, Any], schema: dict[str, Any]) -> str | None:
    """What is wrong with `arguments` under a JSON-schema object (the common subset), or None."""
    properties = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in arguments:
            return f"missing {name}"
    for name, value in arguments.items():
        spec = properties.get(name)
        if spec is None:
            if schema.get("additionalProperties") is False:
                return f"unknown argument {name}"
            continue
        kind = _TYPES.get(spec.get("type"))
        if kind is not None and (
            not isinstance(value, kind) or (isinstance(value, bool) and spec.get("type") != "boolean")
        ):
            return f"{name} must be {spec.get('type')}"
        if "enum" in spec and value not in spec["enum"]:
            return f"{name} must be one of {spec['enum']}"
    return None


def _json_calls(text: str) -> list[dict[str, Any]]:
    try:
        check_depth(text)  # the decoder recurses: text nested past the agent's bound is no call
    except TooDeep:
        return []
    decoder, calls, pos = json.JSONDecoder(), [], 0
    while (pos := text.find("{", pos)) >= 0:
        try:
            value, end = decoder.raw_decode(text, pos)
        except ValueError:
            pos += 1
            continue
        call = _as_call(value)
        if call is not None:
            calls.append(call)
        pos = end
    return calls


def _as_call(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    return {"name": value["name"], "arguments": _loads_or_text(arguments) if isinstance(arguments, str) else arguments}


def _loads_or_text(text: str) -> Any:
    """JSON text's value, read within the agent's bounds; text that is not JSON (or too deep or too
    long to read) stays text (scored as arguments that are not an object)."""
    return value_or_text(text)


def _target(call: dict[str, Any], roles: Roles) -> Any:
    arguments = call["arguments"] if isinstance(call["arguments"], dict) else {}
    return arguments.get(roles.target) if roles.target is not None else None


def _repeats_failure(call: dict[str, Any], failed: Any, error_kind: str | None, roles: Roles) -> bool:
    failed = _as_call(failed)
    if failed is None or failed["name"] != call["name"]:
        return False
    if call["arguments"] == failed["arguments"]:
        return True
    about = REFUSED.get(error_kind or "")
    if not about or not isinstance(failed["arguments"], dict):
        return False
    by_role = {"target": roles.target, "command": roles.command}
    refused = [by_role.get(what, what) for what in about]
    return all(
        k is not None and k in failed["arguments"] and call["arguments"].get(k) == failed["arguments"][k]
        for k in refused
    )
