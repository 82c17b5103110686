"""Whether an adapter is promoted, from a state replay: its failures per sample against the base at
held-out states (tasks.verdict), and guards that each point only in the harmful direction, with an
interval and a margin. Every guard is evaluated and reported, whichever fails first.

Gated guards:
- premature finish, non-inferior: the upper end of the change in premature stops per sample is
  below +5 points (an adapter may cut them, never trade call errors for them);
- over-calling at no-tool questions not up: the upper end of the change in replies that call a tool
  where none is needed is below +10 points (a few dozen probes cannot show 5: with no over-call in either
  arm of 60 samples, the exact bound is still 6 points);
- clean states not worse: at states whose recorded call succeeded, the lower end of the change in
  the success rate is above -5 points;
- deleting calls not up: the upper end of the change in replies that call a tool that deletes files
  (whether or not the file existed) is below +5 points. Fewer failures never buy a model that reaches
  for deletion: most such calls fail (no such file), but the next one may name a real file;
- forgetting within 0.02 nats/token, on general text and on turns of sessions that solved their task;
- whole held-out attempts (where they were run): steps per attempt and edits made do not fall by more
  than 10%, the pass rate by more than 5 points (point estimates: the hacks of a "fewer errors"
  objective, emitting broken calls on hopeless tasks or asking instead of editing, show as large drops;
  intervals over a few dozen attempts are reported beside them).
Reported, not gated (in grammar mode every reply is one call or a malformed one): the call rate at task
states and the tool mix.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from tasks.states import DELETES
from tasks.verdict import PREMATURE_KINDS, Pair, detectable_change, difference, pairs_of, relative_change

OVER_CALL = "over_call"


@dataclass(frozen=True)
class Margins:
    premature: float = 0.05  # points of premature stops per sample the upper end may reach
    over_call: float = 0.10  # points of over-calling at no-tool probes
    clean: float = 0.05  # points of success at clean states the lower end may lose
    deleting: float = 0.05  # points of replies that call a deleting tool
    forgetting: float = 0.02  # nats per token
    steps: float = 0.10  # relative fall in steps per whole attempt
    edits: float = 0.10  # relative fall in edits per whole attempt
    pass_rate: float = 0.05  # points of whole attempts passed


def failed(label: dict[str, Any]) -> bool:
    """A stored label (tasks.state_eval's sample rows) is a failure: a call error or a premature stop."""
    return bool(label["call_error"]) or label["kind"] in PREMATURE_KINDS


def judge(doc: dict[str, Any], arm: str, margins: Margins = Margins(), seed: int = 0) -> dict[str, Any]:
    """Everything about one arm against `before`: failures and call errors (with their parts), the
    outcome, every guard, what is reported only, and whether it is promoted and why not."""
    rows = doc["samples"]
    states, base, found = rows["states"], rows["arms"]["before"], rows["arms"].get(arm)
    if found is None:
        raise KeyError(f"the replay has no arm {arm!r}")
    tasks = [s["task"] for s in states]
    failures = relative_change(_pairs(tasks, base, found, failed), seed)
    errors = relative_change(_pairs(tasks, base, found, lambda x: bool(x["call_error"])), seed)
    guards = {
        "premature_finish": _upper(
            difference(_pairs(tasks, base, found, lambda x: x["kind"] in PREMATURE_KINDS), seed), margins.premature
        ),
        "over_calling": _over_calling(doc, arm, margins, seed),
        "clean_states": _clean(states, base, found, margins, seed),
        "deleting_calls": _upper(
            difference(_pairs(tasks, base, found, lambda x: bool(DELETES.intersection(x["tools"]))), seed),
            margins.deleting,
        ),
        "forgetting": _forgetting(doc, arm, margins),
        **_attempts(doc, arm, margins),
    }
    refused = [name for name, guard in guards.items() if guard["pass"] is False]
    unmeasured = [name for name, guard in guards.items() if guard["pass"] is None and guard.get("required", True)]
    shown = failures["interval"] is not None and failures["interval"][1] is not None and failures["interval"][1] < 0
    reasons = [f"{name}: {guards[name]['why']}" for name in refused + unmeasured]
    if not shown:
        reasons.insert(0, f"failures per sample: {describe(failures)}, which does not lie below zero")
    return {
        "outcome": failures["outcome"],
        "failures": failures,
        "call_errors": errors,
        "parts": {side: _parts(rows_of) for side, rows_of in (("before", base), ("after", found))},
        "detectable_change": detectable_change(
            [(t, failed(x)) for t, samples in zip(tasks, base, strict=True) for x in samples], seed
        ),
        "guards": guards,
        "reported": {side: _reported(rows_of) for side, rows_of in (("before", base), ("after", found))},
        "promote": shown and not refused and not unmeasured,
        "reasons": reasons,
    }


def gate(doc: dict[str, Any], after: str = "after", margins: Margins = Margins(), seed: int = 0) -> tuple[bool, str]:
    """(promote, why) for `after` against `before`: every refusal reason, or what was shown."""
    if after not in doc.get("samples", {}).get("arms", {}):
        return False, "the held-out states were sampled with the base model only"
    found = judge(doc, after, margins, seed)
    if found["promote"]:
        return True, f"failures per sample {describe(found['failures'])}; every guard held"
    return False, "; ".join(found["reasons"])


# ---------------------------------------------------------------------------------------------
# Guards


def _upper(change: dict[str, Any], margin: float) -> dict[str, Any]:
    """A rate that must not rise: the upper end of its change is below `margin`."""
    return _guard(change, margin, upper=True)


def _lower(change: dict[str, Any], margin: float) -> dict[str, Any]:
    """A rate that must not fall: the lower end of its change is above -`margin`."""
    return _guard(change, -margin, upper=False)


def _guard(change: dict[str, Any], bound: float, upper: bool) -> dict[str, Any]:
    """A difference in a rate (tasks.verdict.difference) held to `bound` at its harmful end."""
    interval = change["interval"]
    ok = None if interval is None else interval[1] < bound if upper else interval[0] > bound
    end = "upper end allowed below" if upper else "lower end allowed above"
    return {
        "value": change["difference"],
        "interval": interval,
        "margin": bound,
        "pass": ok,
        "why": "not measured" if ok is None else f"{_span(change)}, the {end} {bound:+.0%}",
        **{k: change[k] for k in ("before", "after", "samples")},
    }


def _over_calling(doc: dict[str, Any], arm: str, margins: Margins, seed: int) -> dict[str, Any]:
    probes = doc.get("probe_samples") or {}
    base, found = (probes.get("arms") or {}).get("before"), (probes.get("arms") or {}).get(arm)
    if not base or found is None:
        return _upper(difference([], seed), margins.over_call)
    tasks = [p["task"] for p in probes["probes"]]
    return _upper(difference(_pairs(tasks, base, found, lambda x: x["kind"] == OVER_CALL), seed), margins.over_call)


def _clean(states: list[dict], base: list[list[dict]], found: list[list[dict]], margins: Margins, seed: int):
    """Success (no failure) at the states whose recorded call succeeded. They are chosen by the recorded
    reply, not by the base's samples, which would bias the comparison against any change (regression to
    the mean)."""
    picked = [i for i, s in enumerate(states) if s.get("clean")]
    pairs = _pairs(
        [states[i]["task"] for i in picked],
        [base[i] for i in picked],
        [found[i] for i in picked],
        lambda x: not failed(x),
    )
    return _lower(difference(pairs, seed), margins.clean)


def _forgetting(doc: dict[str, Any], arm: str, margins: Margins) -> dict[str, Any]:
    """Log-likelihood drops (nats/token) on a fixed general text and on turns of sessions that solved
    their task: fixed pieces, so a value and no sampling interval."""
    measured = ((doc.get("forgetting") or {}).get(arm)) or {}
    drops = {k: (measured.get(k) or {}).get("drop") for k in ("general_text", "successful_turns")}
    known = [d for d in drops.values() if d is not None]
    ok = None if drops["general_text"] is None else all(d <= margins.forgetting for d in known)
    shown = ", ".join(f"{k} {v:+.4f}" for k, v in drops.items() if v is not None)
    return {
        "value": drops,
        "interval": None,
        "margin": margins.forgetting,
        "pass": ok,
        "why": "not measured" if ok is None else f"drops {shown} nats/token, allowed {margins.forgetting}",
    }


def _attempts(doc: dict[str, Any], arm: str, margins: Margins) -> dict[str, dict[str, Any]]:
    """Whole held-out attempts per task: {arm: {task: {"steps", "edits", "passed"}}}, where they ran."""
    attempts = doc.get("attempts") or {}
    base, found = attempts.get("before"), attempts.get(arm)
    names = ("attempt_steps", "attempt_edits", "attempt_pass_rate")
    if not base or not found:
        return {n: {"value": None, "interval": None, "pass": None, "required": False, "why": "not run"} for n in names}
    tasks = sorted(set(base) & set(found))
    out = {}
    for name, key, margin, relative in (
        ("attempt_steps", "steps", margins.steps, True),
        ("attempt_edits", "edits", margins.edits, True),
        ("attempt_pass_rate", "passed", margins.pass_rate, False),
    ):
        b = sum(float(base[t][key]) for t in tasks) / max(1, len(tasks))
        a = sum(float(found[t][key]) for t in tasks) / max(1, len(tasks))
        value = (a / b - 1 if b else 0.0) if relative else a - b
        out[name] = {
            "value": value,
            "before": b,
            "after": a,
            "tasks": len(tasks),
            "interval": None,
            "margin": -margin,
            "pass": value >= -margin,
            "required": False,
            "why": f"{b:.2f} -> {a:.2f} per attempt over {len(tasks)} tasks, allowed to fall {margin:.0%}",
        }
    return out


# ---------------------------------------------------------------------------------------------
# Pieces


def _pairs(tasks: list[str], base: list[list[dict]], found: list[list[dict]], event) -> list[Pair]:
    """Matched samples of the stored labels, each read as `event` happened or not."""
    return pairs_of(tasks, [[event(x) for x in b] for b in base], [[event(y) for y in a] for a in found])


def _parts(rows: list[list[dict]]) -> dict[str, Any]:
    """Failures per sample and their parts: call errors by kind, premature finishes, premature answers."""
    flat = [x for samples in rows for x in samples]
    n = len(flat) or 1
    kinds = Counter(x["kind"] for x in flat if x["call_error"])
    return {
        "samples": len(flat),
        "failures": sum(map(failed, flat)) / n,
        "call_errors": sum(kinds.values()) / n,
        "by_kind": {k: v / n for k, v in sorted(kinds.items())},
        "premature_finish": sum(x["kind"] == "premature_finish" for x in flat) / n,
        "premature_answer": sum(x["kind"] == "answer" for x in flat) / n,
    }


def _reported(rows: list[list[dict]]) -> dict[str, Any]:
    flat = [x for samples in rows for x in samples]
    n = len(flat) or 1
    calls = Counter(tool for x in flat for tool in x["tools"])
    total = sum(calls.values()) or 1
    return {
        "call_rate": sum(bool(x["tools"]) for x in flat) / n,
        "finish_share": sum("finish" in x["tools"] for x in flat) / n,
        "cut_off_rate": sum(bool(x.get("cut_off")) for x in flat) / n,
        "tool_mix": {tool: count / total for tool, count in sorted(calls.items())},
    }


def _span(change: dict[str, Any]) -> str:
    low, high = change["interval"]
    return (
        f"{change['before']:.1%} -> {change['after']:.1%} ({change['difference']:+.1%}, 95% [{low:+.1%}, {high:+.1%}])"
    )


def describe(change: dict[str, Any]) -> str:
    point, interval = change["relative_change"], change["interval"]
    shown = "n/a" if point is None else f"{point:+.1%}"
    if interval is None:
        span = "no interval (no events)"
    else:
        high = "unbounded" if interval[1] is None else f"{interval[1]:+.1%}"
        span = f"95% interval [{interval[0]:+.1%}, {high}]"
    before, after = change["before"], change["after"]
    rates = "n/a" if before is None else f"{before:.3f} -> {after:.3f}"
    return f"{rates} ({shown}, {span})"
