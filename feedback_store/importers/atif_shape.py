"""The fields of an ATIF trajectory (and of a Harbor trial's result.json) that `teachback import atif`
reads, with the types the format gives them (feedback_store.importers.atif). Optional fields
may be written as null. A trajectory with one of these fields of another type is not read."""

from __future__ import annotations

from typing import Any

from feedback_store.importers.log_lines import (
    BOOL,
    COUNT,
    LIST,
    OBJECT,
    TEXT,
    TEXT_OR_LIST,
    Shape,
    nullable,
)

SUPPORTED = frozenset(f"ATIF-v1.{minor}" for minor in range(9))

_STEP: Shape = {
    "": OBJECT,
    "source": TEXT,
    "timestamp": nullable(TEXT),
    "model_name": nullable(TEXT),
    "message": nullable(TEXT_OR_LIST),
    "message.*": OBJECT,  # a content part (v1.6): {"type": "text", "text": ...} or an image
    "message.*.text": nullable(TEXT),
    "is_copied_context": nullable(BOOL),
    "tool_calls": nullable(LIST),
    "tool_calls.*": OBJECT,
    "tool_calls.*.tool_call_id": TEXT,
    "tool_calls.*.function_name": TEXT,
    "tool_calls.*.arguments": nullable(OBJECT),
    "tool_calls.*.extra": nullable(OBJECT),
    "observation": nullable(OBJECT),
    "observation.results": LIST,
    "observation.results.*": OBJECT,
    "observation.results.*.source_call_id": nullable(TEXT),
    "observation.results.*.content": nullable(TEXT_OR_LIST),
    "observation.results.*.content.*": OBJECT,
    "observation.results.*.content.*.text": nullable(TEXT),
    "observation.results.*.extra": nullable(OBJECT),
    "metrics": nullable(OBJECT),
    "metrics.prompt_tokens": COUNT,
    "metrics.completion_tokens": COUNT,
    "extra": nullable(OBJECT),
}

SHAPE: Shape = {
    "schema_version": TEXT,
    "session_id": nullable(TEXT),
    "trajectory_id": nullable(TEXT),
    "agent": OBJECT,
    "agent.name": TEXT,
    "agent.version": nullable(TEXT),
    "agent.model_name": nullable(TEXT),
    "agent.tool_definitions": nullable(LIST),
    "steps": LIST,
    **{f"steps.*.{path}".rstrip("."): check for path, check in _STEP.items()},
    "extra": nullable(OBJECT),
    "subagent_trajectories": nullable(LIST),
}

# A Harbor trial's result.json: the task, the trial, the verifier's rewards and the agent's exception.
RESULT_SHAPE: Shape = {
    "task_name": nullable(TEXT),
    "trial_name": nullable(TEXT),
    "verifier_result": nullable(OBJECT),
    "verifier_result.rewards": nullable(OBJECT),
    "exception_info": nullable(OBJECT),
}


def text_of(content: Any) -> str:
    """A message or result as text: a string as it is; content parts (v1.6) by their text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""
