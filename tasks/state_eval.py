"""`teachback eval --states`: sample K replies at every recorded state, base and adapter with the
same seeds, label each by running it (tasks.states), and compare the call-error rates with an
interval clustered by task.

The rule for a learning claim is fixed here, before any run: the relative change in call errors
per sample is *shown* when its point estimate is at most -30% and the upper end of its 95% interval
is below zero, *refuted* when the lower end is above -30%, and *inconclusive* otherwise. Each run
also prints the smallest drop it could detect at 80% power, so an underpowered run says so.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.states import (
    DEFAULT_CAP,
    FINISHED,
    OK,
    PREMATURE,
    Label,
    Sampler,
    Scratch,
    State,
    StateError,
    label_reply,
    load_states,
    recorded_cap,
    replayable,
)

TARGET = -0.30  # the change a learning round is meant to reach
CONFIDENCE = 0.95
Z_ALPHA, Z_POWER = 1.959964, 0.841621  # two-sided 5%, 80% power
RESAMPLES = 2_000
MIN_CLUSTERS = 5  # fewer tasks than this: no interval (a bootstrap over 2-4 tasks says nothing)
Say = Callable[[str], None]


@dataclass(frozen=True)
class ReplayConfig:
    db: Path
    arms: dict[str, str]  # "before" / "after" -> model string (local/<model>@<adapter or none>)
    task_file: Path
    samples: int = 4
    cap: int = DEFAULT_CAP
    temperature: float | None = None  # None: each session's own
    threads: int | None = None  # the embedded model's threads; None: each session's own
    max_per_session: int | None = 6
    sessions: frozenset[str] | None = None  # only these (e.g. a held-out split); None: all
    seed: int = 0  # the bootstrap's
    probes: int | None = None  # no-tool probes (tasks.probes) from the first states of this many sessions; None: all


def run_replay(config: ReplayConfig, say: Say | None = None) -> dict[str, Any]:
    """Sample, label and compare; the JSON document `teachback eval --states --json` prints."""
    from tasks.records import load_tasks

    say = say or (lambda _: None)
    started, cpu = time.perf_counter(), time.process_time()
    states = [s for s in load_states(config.db, max_per_session=config.max_per_session) if replayable(s)]
    if config.sessions is not None:
        states = [s for s in states if s.session_id in config.sessions]
    if not states:
        raise StateError(
            f"{config.db} holds no replayable states: record task attempts of the embedded model first "
            "(teachback tasks run --model local/smollm2), which store each call's prompt tokens"
        )
    tasks = {t.instance_id: t for t in load_tasks(config.task_file)}
    missing = sorted({s.task_id for s in states} - set(tasks))
    if missing:
        raise StateError(f"the tasks {', '.join(missing[:3])} are not in {config.task_file}: give their --tasks file")
    from tasks.probes import build_probes, probe_label

    probes = build_probes(states)
    if config.probes is not None and len(probes) > config.probes:  # spread over the sessions, every repository's
        probes = [probes[i * len(probes) // config.probes] for i in range(config.probes)]
    labels: dict[str, list[list[Label]]] = {}
    probe_labels: dict[str, list[Label]] = {}
    reproduced = Counter()
    scratches = {id(s): Scratch(s, tasks[s.task_id], config.task_file) for s in states}
    try:
        for arm, model in config.arms.items():
            sampler = Sampler(model, cap=config.cap, temperature=config.temperature, threads=config.threads)
            labels[arm] = asyncio.run(
                _sample_arm(
                    config, arm, sampler, states, scratches, tasks, say, reproduced if arm == "before" else None
                )
            )
            probe_labels[arm] = asyncio.run(_sample_probes(config, sampler, probes, probe_label))
            if probes:
                say(f"{arm}: {len(probes)} no-tool probes: {', '.join(label.kind for label in probe_labels[arm])}")
    finally:
        for scratch in scratches.values():
            scratch.close()
    doc: dict[str, Any] = {
        "states": len(states),
        "samples_per_state": config.samples,
        "sessions": len({s.session_id for s in states}),
        "clusters": len({s.cluster for s in states}),
        "cap_tokens": config.cap,
        "models": dict(config.arms),
        "arms": {arm: summarize(found) for arm, found in labels.items()},
        "reproduced": dict(reproduced),
        "detectable_change": detectable_change(states, labels["before"], config.seed),
        "min_clusters": MIN_CLUSTERS,
        "rule": "shown: change <= -30% and upper < 0; refuted: lower > -30%; else inconclusive",
    }
    doc["changes"] = {
        arm: compare(states, labels["before"], found, config.seed) for arm, found in labels.items() if arm != "before"
    }
    if "after" in doc["changes"]:
        doc["change"] = doc["changes"]["after"]
    doc["clean_states"] = clean_states(states, labels)
    doc["cells"] = {arm: _clusters(states, found) for arm, found in labels.items()}  # task -> [call errors, samples]
    doc["no_tool"] = {
        "probes": len(probes),
        **{
            arm: {"success_rate": _success(found), "tool_mix": dict(Counter(t for x in found for t in x.tools))}
            for arm, found in probe_labels.items()
        },
    }
    doc["wall_s"] = round(time.perf_counter() - started, 1)
    doc["cpu_s"] = round(time.process_time() - cpu, 1)
    return doc


async def _sample_arm(
    config: ReplayConfig,
    arm: str,
    sampler: Sampler,
    states: list[State],
    scratches: dict[int, Scratch],
    tasks: dict[str, Any],
    say: Say,
    reproduced: Counter | None,
) -> list[list[Label]]:
    out = []
    for number, state in enumerate(states, 1):
        found = []
        for k in range(config.samples):
            reply = await sampler.sample(state, k)
            copy = scratches[id(state)].copy(f"{arm}-{k}")
            try:
                label = await label_reply(state, reply, copy, tasks[state.task_id], config.task_file, sampler.cap)
            finally:
                shutil.rmtree(copy.parent, ignore_errors=True)
            found.append(label)
            if reproduced is not None and k == state.config.get("seed") and _same_model(sampler, state):
                _check_reproduced(reproduced, state, reply, label, sampler.cap)
        out.append(found)
        say(f"{arm}: state {number}/{len(states)}: {', '.join(label.kind for label in found)}")
    return out


async def _sample_probes(config: ReplayConfig, sampler: Sampler, probes: list[State], label: Any) -> list[Label]:
    """The probes' labels, K samples each under the seeds of the states (no call is run)."""
    found = []
    for probe in probes:
        for k in range(config.samples):
            found.append(label(await sampler.sample(probe, k)))
    return found


def _success(labels: list[Label]) -> float | None:
    """The share of replies that made no call error and did not finish early."""
    if not labels:
        return None
    return sum(
        not label.call_error and label.kind != PREMATURE and label.kind != "over_call" for label in labels
    ) / len(labels)


def clean_states(states: list[State], labels: dict[str, list[list[Label]]]) -> dict[str, Any]:
    """Each arm's success rate at the states whose recorded call succeeded. They are chosen by the
    recorded reply, not by the base's replay samples: choosing by the base's own samples would
    bias the comparison against any adapter that changes them (regression to the mean)."""
    picked = [i for i, state in enumerate(states) if state.recorded.kind in (OK, FINISHED)]
    out: dict[str, Any] = {"states": len(picked)}
    for arm, found in labels.items():
        out[arm] = _success([label for i in picked for label in found[i]])
    return out


def _same_model(sampler: Sampler, state: State) -> bool:
    recorded = str(state.config.get("model") or "")
    return sampler.model == recorded or (sampler.model.endswith("@none") and "@" not in recorded)


def _check_reproduced(counts: Counter, state: State, reply: Any, label: Label, cap: int) -> None:
    """The recorded seed drew the recorded reply again (the tokens both have, under either cap),
    and labelling says what the session recorded for that call (where the two replies end alike:
    neither was cut short, or both at the same cap)."""
    counts["checked"] += 1
    ours, theirs = reply.completion_token_ids or [], state.reply_ids or []
    n = min(len(ours), len(theirs))
    if ours[:n] != theirs[:n] or reply.prompt_token_ids != state.prompt_ids:
        return
    counts["same_tokens"] += 1
    if cap == recorded_cap(state) or max(len(ours), len(theirs)) < min(cap, recorded_cap(state)):
        counts["labels_checked"] += 1
        counts["same_label"] += label.kind == state.recorded.kind


def summarize(labels: list[list[Label]]) -> dict[str, Any]:
    """Rates per sample: call errors (and by kind), premature finish, replies with a call, and the
    share of each tool among the calls made."""
    flat = [label for found in labels for label in found]
    n = len(flat) or 1
    errors = [label.kind for label in flat if label.call_error]
    calls = Counter(tool for label in flat for tool in label.tools)
    total_calls = sum(calls.values()) or 1
    return {
        "samples": len(flat),
        "call_errors": len(errors),
        "call_error_rate": len(errors) / n,
        "by_kind": {kind: count / n for kind, count in sorted(Counter(errors).items())},
        "premature_finish_rate": sum(label.kind == PREMATURE for label in flat) / n,
        "cut_off_rate": sum(label.cut_off for label in flat) / n,
        "call_rate": sum(bool(label.tools) for label in flat) / n,
        "finish_share": sum("finish" in label.tools for label in flat) / n,
        "tool_mix": {tool: count / total_calls for tool, count in sorted(calls.items())},
    }


def _clusters(states: list[State], labels: list[list[Label]]) -> dict[str, list[int]]:
    """cluster -> [call errors, samples]"""
    out: dict[str, list[int]] = {}
    for state, found in zip(states, labels, strict=True):
        cell = out.setdefault(state.cluster, [0, 0])
        cell[0] += sum(label.call_error for label in found)
        cell[1] += len(found)
    return out


def compare(states: list[State], before: list[list[Label]], after: list[list[Label]], seed: int) -> dict[str, Any]:
    """The relative change in call errors per sample (after / before - 1), with a percentile
    bootstrap interval that resamples tasks (clusters), both arms together (they share seeds)."""
    return compare_cells(_clusters(states, before), _clusters(states, after), seed)


def compare_cells(b: dict[str, list[int]], a: dict[str, list[int]], seed: int) -> dict[str, Any]:
    """`compare` on per-task [call errors, samples] cells (a subset of the tasks, e.g. one repository's)."""
    names = sorted(b)
    point = _ratio([b[c] for c in names], [a[c] for c in names])
    rng = random.Random(seed)
    draws = []
    for _ in range(RESAMPLES if len(names) >= MIN_CLUSTERS else 0):
        pick = [rng.choice(names) for _ in names]
        ratio = _ratio([b[c] for c in pick], [a[c] for c in pick])
        if ratio is not None:
            draws.append(ratio)
    interval = _percentiles(draws)
    verdict = None
    if point is not None and interval is not None:
        low, high = interval
        verdict = "shown" if point <= TARGET and high < 0 else "refuted" if low > TARGET else "inconclusive"
    rates = (_rate([b[c] for c in names]), _rate([a[c] for c in names]))
    return {
        "before": rates[0],
        "after": rates[1],
        "relative_change": point,
        "interval": interval,
        "resamples_used": len(draws),
        "verdict": verdict,
        "tasks": len(names),
    }


def repository(task_id: str) -> str:
    """The repository of a synthesised task id (`<repository>.<8 hex of its base>.<strategy>__<name>`)."""
    found = re.match(r"^(.*)\.[0-9a-f]{8}\.", task_id)
    return found.group(1) if found else task_id


def compare_arms(doc: dict[str, Any], seed: int = 0) -> dict[str, dict[str, Any]]:
    """Every arm's change against `before` (`doc["changes"]`), each with the same comparison per
    repository of the held-out tasks (`by_repository`): what transfers to a repository the
    training never saw."""
    cells = doc.get("cells") or {}
    base = cells.get("before") or {}
    out = {}
    for arm, change in (doc.get("changes") or {}).items():
        groups: dict[str, list[str]] = {}
        for task in base:
            groups.setdefault(repository(task), []).append(task)
        by_repository = {
            name: compare_cells({t: base[t] for t in tasks}, {t: cells[arm][t] for t in tasks}, seed)
            for name, tasks in sorted(groups.items())
        }
        out[arm] = {**change, "by_repository": by_repository}
    return out


def detectable_change(states: list[State], before: list[list[Label]], seed: int) -> float | None:
    """The smallest relative drop in call errors this run could detect at 80% power (two-sided 5%),
    from the before arm's variance over tasks, as if the arms were independent: pairing them by seed
    only narrows the interval, so this is what the run can promise before it is run."""
    return detectable_cells(_clusters(states, before), seed)


def detectable_cells(b: dict[str, list[int]], seed: int) -> float | None:
    """`detectable_change` from per-task [count, samples] cells of the arm compared against."""
    names = sorted(b)
    if len(names) < MIN_CLUSTERS:
        return None
    rng = random.Random(seed)
    logs = []
    for _ in range(RESAMPLES):
        rate = _rate([b[c] for c in (rng.choice(names) for _ in names)])
        if rate:
            logs.append(math.log(rate))
    if len(logs) < RESAMPLES // 2 or not _rate([b[c] for c in names]):
        return None  # too few events to say
    mean = sum(logs) / len(logs)
    se = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)) * math.sqrt(2)
    return math.exp(-(Z_ALPHA + Z_POWER) * se) - 1


def _rate(cells: list[list[int]]) -> float | None:
    samples = sum(c[1] for c in cells)
    return sum(c[0] for c in cells) / samples if samples else None


def _ratio(before: list[list[int]], after: list[list[int]]) -> float | None:
    rb, ra = _rate(before), _rate(after)
    if not rb or ra is None:
        return None
    return ra / rb - 1


def _percentiles(draws: list[float]) -> list[float] | None:
    if len(draws) < RESAMPLES // 2:
        return None
    draws = sorted(draws)
    tail = (1 - CONFIDENCE) / 2
    return [draws[int(tail * (len(draws) - 1))], draws[int((1 - tail) * (len(draws) - 1))]]


def render(doc: dict[str, Any]) -> str:
    """The table `teachback eval --states` prints."""
    lines = [
        f"{doc['states']} states from {doc['sessions']} sessions ({doc['clusters']} tasks), "
        f"{doc['samples_per_state']} samples each, replies capped at {doc['cap_tokens']} tokens",
        f"{'':24}" + "".join(f"{arm:>12}" for arm in doc["arms"]),
    ]
    for key, name in (
        ("call_error_rate", "call errors / sample"),
        ("premature_finish_rate", "premature finish"),
        ("call_rate", "replies with a call"),
        ("finish_share", "replies calling finish"),
        ("cut_off_rate", "cut off at the cap"),
    ):
        lines.append(f"{name:24}" + "".join(f"{arm.get(key, 0.0):>12.3f}" for arm in doc["arms"].values()))
    clean, probes = doc.get("clean_states") or {}, doc.get("no_tool") or {}
    if clean.get("states"):
        lines.append(
            f"{'success, clean states':24}"
            + "".join(f"{_cell(clean.get(arm)):>12}" for arm in doc["arms"])
            + f"  ({clean['states']} states whose recorded call succeeded)"
        )
    if probes.get("probes"):
        lines.append(
            f"{'success, no-tool probes':24}"
            + "".join(f"{_cell((probes.get(arm) or {}).get('success_rate')):>12}" for arm in doc["arms"])
            + f"  ({probes['probes']} probes)"
        )
    kinds = sorted({k for arm in doc["arms"].values() for k in arm["by_kind"]})
    for kind in kinds:
        lines.append(f"  {kind:22}" + "".join(f"{arm['by_kind'].get(kind, 0):>12.3f}" for arm in doc["arms"].values()))
    change = doc.get("change")
    if change:
        interval = change["interval"]
        shown = "n/a" if change["relative_change"] is None else f"{change['relative_change']:+.1%}"
        span = "n/a" if interval is None else f"[{interval[0]:+.1%}, {interval[1]:+.1%}]"
        lines.append(f"relative change in call errors: {shown}, 95% interval {span}: {change['verdict']}")
    detectable = doc["detectable_change"]
    lines.append(
        "smallest detectable change (80% power): "
        + (
            f"n/a (fewer than {MIN_CLUSTERS} tasks, or too few call errors)"
            if detectable is None
            else f"{detectable:+.1%}"
        )
        + ("  (underpowered for -30%)" if detectable is None or detectable < TARGET else "")
    )
    repro = doc.get("reproduced") or {}
    if repro.get("checked"):
        lines.append(
            f"recorded calls drawn again: {repro.get('same_tokens', 0)}/{repro['checked']} same tokens, "
            f"{repro.get('same_label', 0)}/{repro.get('labels_checked', 0)} same label"
        )
    lines.append(f"rule: {doc['rule']}")
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def gate(
    doc: dict[str, Any],
    *,
    after: str = "after",
    max_shift: float = 0.05,
    max_upper: float = 0.0,
    max_premature_rise: float = 0.02,
    max_drop: float = 0.05,
) -> tuple[bool, str]:
    """Promote an adapter (the arm `after`) on a state replay (`doc`), or not, and why: only when the
    95% interval of the relative change in call errors lies below `max_upper` (zero by default);
    the replies with a call, the finish share and each tool's share of the calls move by at most
    `max_shift`; premature finishes rise by at most `max_premature_rise`; and the success rate at
    the no-tool probes and at the states whose recorded call succeeded drops by at most
    `max_drop`. Fine-tuning a small model on tool rows is known to teach over-calling: these see it."""
    arms = doc["arms"]
    before, found = arms["before"], arms.get(after)
    change = (doc.get("changes") or {}).get(after) or (doc.get("change") if after == "after" else None)
    if found is None or change is None:
        return False, "the held-out states were sampled with the base model only"
    for key, what in (("call_rate", "replies with a tool call"), ("finish_share", "replies that call finish")):
        shift = found.get(key, 0.0) - before.get(key, 0.0)
        if abs(shift) > max_shift:
            return False, (
                f"{what} moved from {before.get(key, 0.0):.0%} to {found.get(key, 0.0):.0%} of replies "
                f"(allowed ±{max_shift:.0%}): fewer call errors that way is not learning"
            )
    for tool in sorted(set(before["tool_mix"]) | set(found["tool_mix"])):
        a, b = before["tool_mix"].get(tool, 0.0), found["tool_mix"].get(tool, 0.0)
        if abs(b - a) > max_shift:
            return False, f"{tool}'s share of the calls moved from {a:.0%} to {b:.0%} (allowed ±{max_shift:.0%})"
    rise = found["premature_finish_rate"] - before["premature_finish_rate"]
    if rise > max_premature_rise:
        return False, (
            f"premature finishes rose from {before['premature_finish_rate']:.0%} to "
            f"{found['premature_finish_rate']:.0%} of replies (allowed +{max_premature_rise:.0%})"
        )
    for key, what in (
        ("no_tool", "the no-tool probes (questions that need no tool: it called one)"),
        ("clean_states", "the states whose recorded call succeeded"),
    ):
        part = doc.get(key) or {}
        base_rate = part.get("before", {}).get("success_rate") if key == "no_tool" else part.get("before")
        rate = (part.get(after) or {}).get("success_rate") if key == "no_tool" else part.get(after)
        if base_rate is not None and rate is not None and base_rate - rate > max_drop:
            return False, (
                f"its success rate at {what} fell from {base_rate:.0%} to {rate:.0%} (allowed -{max_drop:.0%})"
            )
    interval, point = change["interval"], change["relative_change"]
    if interval is None or point is None:
        return False, (
            f"no interval for the change in call errors at {doc['states']} held-out states of {doc['clusters']} "
            f"tasks (at least {MIN_CLUSTERS} tasks with call errors are needed)"
        )
    low, high = interval
    if not high < max_upper:
        return False, (
            f"the change in call errors per sample, {point:+.1%}, has a 95% interval [{low:+.1%}, {high:+.1%}] "
            "that does not lie below zero"
        )
    return True, (
        f"call errors per sample {change['before']:.3f} → {change['after']:.3f} ({point:+.1%}, 95% interval "
        f"[{low:+.1%}, {high:+.1%}]) at {doc['states']} held-out states"
    )
