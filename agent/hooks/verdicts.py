"""What a hook's exit status and output mean, event by event, as Claude Code's hooks reference
documents them:

- exit 0: success; stdout may be a JSON object of decisions. For SessionStart and UserPromptSubmit,
  plain stdout is context for the model.
- exit 2: a blocking error; stderr is the reason. PreToolUse blocks the call and PermissionRequest
  denies it (the model reads the reason); UserPromptSubmit blocks the prompt; Stop keeps the agent
  going with the reason; PostToolUse and PostToolUseFailure show the reason to the model (the call
  already ran); SessionStart shows it to the user only.
- any other exit status, a timeout, or a hook that cannot start: a non-blocking error, shown to the
  user; the call goes on as if the hook had said nothing (the approval policy still decides).
- JSON: `continue: false` stops the turn (`stopReason`); PreToolUse's `hookSpecificOutput` holds
  `permissionDecision` (allow, deny, ask), `permissionDecisionReason`, `updatedInput` and
  `additionalContext`; PermissionRequest's holds `decision: {behavior: allow|deny, message}`; other
  events use `decision: "block"` with a `reason`, and `additionalContext`.

What cannot be read (JSON that is not an object, a decision that is not one of the documented
values) is a `problem`: reported to the user, and never taken as an allow."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from agent.hooks.command import Ran
from agent.protocol.arguments import read_arguments
from common.text import clip

REASON_CHARS = 2_000  # of a hook's reason, as the model reads it
TOOL_DECISIONS = ("allow", "deny", "ask")
LEGACY = {"approve": "allow", "block": "deny"}  # PreToolUse's older top-level `decision`
CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit")  # plain stdout is context for the model
BLOCKED_BY_EXIT_2 = {
    "PreToolUse": "deny",
    "PermissionRequest": "deny",
    "UserPromptSubmit": "block",
    "Stop": "block",
}


@dataclass(frozen=True)
class Verdict:
    """What one hook (or all of one event's hooks together) said. `decision`: allow, deny or ask
    for a call; block for a prompt or a stop. `reason` is the model's text for a deny (or the
    user's, for a blocked prompt)."""

    decision: str | None = None
    reason: str = ""
    updated_input: Any = None  # a rewritten call's arguments (checked against the tool's schema)
    context: str = ""  # for the model: additionalContext, or what a PostToolUse hook said
    stop: str | None = None  # `continue: false`: why the turn stops
    notice: str = ""  # systemMessage: for the user
    problem: str | None = None  # the hook failed or printed what cannot be read: reported once
    error_kind: str = "denied"  # a built-in hook may answer with what its answer is (not_found)


def read_verdict(event: str, ran: Ran, timeout: float) -> Verdict:
    if ran.start_error is not None:
        return Verdict(problem=f"could not start ({ran.start_error}); it was skipped")
    if ran.timed_out:
        return Verdict(problem=f"did not finish within its {timeout:g} s timeout; it was stopped and skipped")
    if ran.exit_code == 2:
        reason = clip(ran.stderr.strip(), REASON_CHARS, "...") or "(the hook gave no reason on stderr)"
        decision = BLOCKED_BY_EXIT_2.get(event)
        if decision is not None:
            return Verdict(decision=decision, reason=reason)
        if event == "SessionStart":
            return Verdict(notice=reason)
        return Verdict(context=reason)  # PostToolUse, PostToolUseFailure: the call already ran
    if ran.exit_code != 0:
        said = clip(ran.stderr.strip(), 300, "...")
        return Verdict(problem=f"exited with status {ran.exit_code}{f': {said}' if said else ''}; it was skipped")
    text = ran.stdout.strip()
    if not text:
        return Verdict()
    if not text.startswith("{"):
        if event in CONTEXT_EVENTS:
            return Verdict(context=clip(text, REASON_CHARS, "..."))
        return Verdict(problem="printed text that is not a JSON object; it was ignored")
    read = read_arguments(text)  # bounded: size, depth and numbers, never an exception
    if read.value is None:
        return Verdict(problem=f"printed output that is not a JSON object ({read.problem}); it was ignored")
    return _from_json(event, read.value)


def _from_json(event: str, data: dict[str, Any]) -> Verdict:
    specific = data.get("hookSpecificOutput")
    specific = specific if isinstance(specific, dict) else {}
    found = Verdict(
        stop=_text(data.get("stopReason")) or "A hook stopped the turn." if data.get("continue") is False else None,
        notice=_text(data.get("systemMessage")),
        context=_text(specific.get("additionalContext")),
    )
    if event == "PreToolUse":
        decision = specific.get("permissionDecision")
        reason = specific.get("permissionDecisionReason")
        if decision is None and data.get("decision") is not None:
            decision, reason = LEGACY.get(data["decision"], data["decision"]), data.get("reason")
        if decision == "defer":
            decision = None
        if decision is not None and decision not in TOOL_DECISIONS:
            return replace(found, problem=f"gave permissionDecision {decision!r}, not allow, deny or ask; ignored")
        return replace(found, decision=decision, reason=_text(reason), updated_input=specific.get("updatedInput"))
    if event == "PermissionRequest":
        chosen = specific.get("decision")
        behavior = chosen.get("behavior") if isinstance(chosen, dict) else None
        if chosen is not None and behavior not in ("allow", "deny"):
            return replace(found, problem=f"gave decision {chosen!r}, not behavior allow or deny; ignored")
        if behavior is None:
            return found
        stop = found.stop or ("A PermissionRequest hook stopped the turn." if chosen.get("interrupt") else None)
        return replace(found, decision=behavior, reason=_text(chosen.get("message")), stop=stop)
    decision = data.get("decision")
    if decision not in (None, "block", "approve"):
        return replace(found, problem=f'gave decision {decision!r}, not "block"; ignored')
    if decision != "block":
        return found
    reason = _text(data.get("reason"))
    if event in ("PostToolUse", "PostToolUseFailure"):
        return replace(found, context="\n".join(t for t in (reason, found.context) if t))
    return replace(found, decision="block", reason=reason or "(the hook gave no reason)")


def _text(value: Any) -> str:
    return clip(value.strip(), REASON_CHARS, "...") if isinstance(value, str) else ""


def combine(verdicts: Sequence[Verdict]) -> Verdict:
    """One event's hooks together, as Claude Code combines them: deny (or block) wins over ask,
    ask over allow; the first rewrite given by a hook that did not deny; every context and notice."""
    decided = [v for v in verdicts if v.decision is not None]
    for decision in ("deny", "block", "ask", "allow"):
        same = [v for v in decided if v.decision == decision]
        if same:
            break
    else:
        same = []
    first = same[0] if same else Verdict()
    rewrite = next((v.updated_input for v in verdicts if v.updated_input is not None and v.decision != "deny"), None)
    return Verdict(
        decision=first.decision,
        reason="\n".join(v.reason for v in same if v.reason),
        updated_input=rewrite if first.decision != "deny" else None,
        context="\n".join(v.context for v in verdicts if v.context),
        stop=next((v.stop for v in verdicts if v.stop), None),
        notice="\n".join(v.notice for v in verdicts if v.notice),
        error_kind=first.error_kind,
    )
