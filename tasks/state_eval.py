"""`teachback eval --states`: sample K replies at every recorded state, base and adapter with the
same seeds, label each by running it (tasks.states), and judge each adapter against the base by its
failures per sample (call errors and premature stops) and the guards of tasks.gate.

The rule is fixed before any run (tasks.verdict.RULE) and printed with the results; the smallest
change the run could detect is printed after the base arm is sampled and before any adapter is.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.states import (
    ANSWER,
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
from tasks.verdict import MIN_CLUSTERS, RULE, TARGET, detectable_change, is_failure

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
    cache: Path | None = None  # a folder keeping each arm's labels, reused where model, states and seeds are the same
    executor: str = "local"  # where each session's states are sampled and labelled (tasks.executors)
    parallel: int = 1  # sessions at once; 1 with the local executor: in this process, state by state
    address: str | None = None  # the Ray cluster's; None: a local Ray started for the run


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
    probe_labels: dict[str, list[list[Label]]] = {}
    reproduced = Counter()
    here = config.executor == "local" and config.parallel <= 1  # otherwise each unit builds its own files
    scratches = {id(s): Scratch(s, tasks[s.task_id], config.task_file) for s in states} if here else {}
    cluster = contextlib.ExitStack()
    try:
        if config.executor == "ray":  # one cluster for every arm (a start takes seconds)
            from tasks.executors import ray_cluster

            cluster.enter_context(ray_cluster(config.address))
        for arm, model in config.arms.items():
            cached = arm_cache(config, model, states, probes)
            if cached is not None and cached.is_file():
                labels[arm], probe_labels[arm] = _read_labels(cached)
                say(f"{arm}: {model}'s labels at these states and seeds, from {cached}")
            else:
                sampler = Sampler(model, cap=config.cap, temperature=config.temperature, threads=config.threads)
                counts = reproduced if arm == "before" else None
                if here:
                    labels[arm] = asyncio.run(sample_arm(config, arm, sampler, states, scratches, tasks, say, counts))
                else:
                    from tasks.state_groups import replay_spread

                    labels[arm] = replay_spread(config, arm, sampler, states, tasks, say, counts, sample_arm)
                probe_labels[arm] = asyncio.run(_sample_probes(config, sampler, probes, probe_label))
                if cached is not None:
                    _write_labels(cached, labels[arm], probe_labels[arm])
            if probes:
                kinds = Counter(label.kind for found in probe_labels[arm] for label in found)
                say(f"{arm}: {len(probes)} no-tool probes: {dict(kinds)}")
            if arm == "before":
                pairs = [(s.cluster, is_failure(x)) for s, found in zip(states, labels[arm]) for x in found]
                found = detectable_change(pairs, config.seed)
                say(
                    "smallest detectable change in failures (80% power), before any adapter is sampled: "
                    + ("n/a" if found is None else f"{found:+.1%}")
                )
    finally:
        cluster.close()
        for scratch in scratches.values():
            scratch.close()
    doc = document(states, labels, probes, probe_labels, config.seed)
    doc.update(samples_per_state=config.samples, cap_tokens=config.cap, models=dict(config.arms))
    doc["reproduced"] = dict(reproduced)
    doc["wall_s"] = round(time.perf_counter() - started, 1)
    doc["cpu_s"] = round(time.process_time() - cpu, 1)
    return doc


def document(
    states: list[State],
    labels: dict[str, list[list[Label]]],
    probes: list[State] = (),
    probe_labels: dict[str, list[list[Label]]] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """The replay's JSON document from its labels: every sample kept (matched across arms by state
    and seed), each arm's rates, and each arm judged against `before` (tasks.gate)."""
    from tasks.gate import judge

    doc: dict[str, Any] = {
        "states": len(states),
        "sessions": len({s.session_id for s in states}),
        "clusters": len({s.cluster for s in states}),
        "rule": RULE,
        "arms": {arm: summarize(found) for arm, found in labels.items()},
        "samples": {
            "states": [_state_row(s) for s in states],
            "arms": {arm: [[_label_row(x) for x in found] for found in rows] for arm, rows in labels.items()},
        },
        "probe_samples": {
            "probes": [{"task": p.cluster, "session": p.session_id} for p in probes],
            "arms": {
                arm: [[_label_row(x) for x in found] for found in rows] for arm, rows in (probe_labels or {}).items()
            },
        },
    }
    pairs = [(s.cluster, is_failure(x)) for s, found in zip(states, labels["before"]) for x in found]
    doc["detectable_change"] = detectable_change(pairs, seed)
    doc["changes"] = {arm: judge(doc, arm, seed=seed) for arm in labels if arm != "before"}
    if "after" in doc["changes"]:
        doc["change"] = doc["changes"]["after"]
    return doc


def arm_cache(config: ReplayConfig, model: str, states: list[State], probes: list[State]) -> Path | None:
    """Where an arm's labels are kept: named by a hash of everything that decides them (the model
    string and the size and time of each file it names, the cap, temperature and threads, the number
    of samples, and each state's and probe's session, step and prompt tokens)."""
    if config.cache is None:
        return None
    files = [Path(part) for part in model.removeprefix("local/").split("@") if part and part != "none"]
    stamps = [[str(f), f.stat().st_size, f.stat().st_mtime_ns] for f in files if f.is_file()]
    identity = [
        model,
        stamps,
        config.cap,
        config.temperature,
        config.threads,
        config.samples,
        [[s.session_id, s.step, hashlib.sha256(str(s.prompt_ids).encode()).hexdigest()] for s in states],
        [[p.session_id, p.step, hashlib.sha256(json.dumps(p.messages).encode()).hexdigest()] for p in probes],
    ]
    digest = hashlib.sha256(json.dumps(identity, default=str).encode()).hexdigest()[:24]
    return config.cache / f"labels-{digest}.json"


def _write_labels(path: Path, labels: list[list[Label]], probes: list[list[Label]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = {"states": [[_label_row(x) for x in found] for found in labels]}
    rows["probes"] = [[_label_row(x) for x in found] for found in probes]
    part = path.with_suffix(".part")
    part.write_text(json.dumps(rows), encoding="utf-8")
    part.replace(path)  # whole or absent: a killed run never leaves half an arm


def _read_labels(path: Path) -> tuple[list[list[Label]], list[list[Label]]]:
    rows = json.loads(path.read_text(encoding="utf-8"))

    def label(row: dict[str, Any]) -> Label:
        return Label(row["kind"], tuple(row["tools"]), cut_off=row["cut_off"])

    return [[label(x) for x in found] for found in rows["states"]], [[label(x) for x in f] for f in rows["probes"]]


def _state_row(state: State) -> dict[str, Any]:
    """What the judgement needs of a state: its task, and whether its recorded call succeeded."""
    return {
        "task": state.cluster,
        "session": state.session_id,
        "step": state.step,
        "clean": state.recorded.kind in (OK, FINISHED),
        "edits": state.edit_count,
    }


def _label_row(label: Label) -> dict[str, Any]:
    return {"kind": label.kind, "tools": list(label.tools), "call_error": label.call_error, "cut_off": label.cut_off}


async def sample_arm(
    config: ReplayConfig,
    arm: str,
    sampler: Sampler,
    states: list[State],
    scratches: dict[int, Scratch],
    tasks: dict[str, Any],
    say: Say,
    reproduced: Counter | None,
) -> list[list[Label]]:
    """K labelled samples at each state, state by state, each on its own copy of the state's files."""
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


async def _sample_probes(config: ReplayConfig, sampler: Sampler, probes: list[State], label: Any) -> list[list[Label]]:
    """The probes' labels, K samples each under the seeds of the states (no call is run)."""
    return [[label(await sampler.sample(probe, k)) for k in range(config.samples)] for probe in probes]


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
    """Rates per sample: failures (call errors and premature stops) and their parts, and, reported
    only, replies with a call and the share of each tool among the calls made."""
    flat = [label for found in labels for label in found]
    n = len(flat) or 1
    errors = [label.kind for label in flat if label.call_error]
    calls = Counter(tool for label in flat for tool in label.tools)
    total_calls = sum(calls.values()) or 1
    return {
        "samples": len(flat),
        "failures": sum(map(is_failure, flat)),
        "failure_rate": sum(map(is_failure, flat)) / n,
        "call_errors": len(errors),
        "call_error_rate": len(errors) / n,
        "by_kind": {kind: count / n for kind, count in sorted(Counter(errors).items())},
        "premature_finish_rate": sum(label.kind == PREMATURE for label in flat) / n,
        "premature_answer_rate": sum(label.kind == ANSWER for label in flat) / n,
        "cut_off_rate": sum(label.cut_off for label in flat) / n,
        "call_rate": sum(bool(label.tools) for label in flat) / n,
        "finish_share": sum("finish" in label.tools for label in flat) / n,
        "tool_mix": {tool: count / total_calls for tool, count in sorted(calls.items())},
    }


def repository(task_id: str) -> str:
    """The repository of a synthesised task id (`<repository>.<8 hex of its base>.<strategy>__<name>`)."""
    found = re.match(r"^(.*)\.[0-9a-f]{8}\.", task_id)
    return found.group(1) if found else task_id


def strata(doc: dict[str, Any], arm: str, groups: dict[str, Callable[[dict[str, Any]], bool]], seed: int = 0):
    """The change in failures of `arm` within groups of the held-out states (each a test on a state
    row: a repository, first or later states, ...), with the detectable change of each."""
    from tasks.gate import failed
    from tasks.verdict import pairs_of, relative_change

    rows = doc["samples"]
    out = {}
    for name, member in groups.items():
        picked = [i for i, state in enumerate(rows["states"]) if member(state)]
        tasks = [rows["states"][i]["task"] for i in picked]
        base = [[failed(x) for x in rows["arms"]["before"][i]] for i in picked]
        found = [[failed(x) for x in rows["arms"][arm][i]] for i in picked]
        change = relative_change(pairs_of(tasks, base, found), seed)
        pairs = [(t, x) for t, samples in zip(tasks, base) for x in samples]
        out[name] = {**change, "detectable_change": detectable_change(pairs, seed)}
    return out


def by_repository(doc: dict[str, Any], arm: str, seed: int = 0) -> dict[str, Any]:
    """`strata` by the repository of each held-out task: what transfers to a repository the training never saw."""
    names = sorted({repository(s["task"]) for s in doc["samples"]["states"]})
    return strata(doc, arm, {n: (lambda s, n=n: repository(s["task"]) == n) for n in names}, seed)


def render(doc: dict[str, Any]) -> str:
    """The table `teachback eval --states` prints: failures first, then their parts, then what is
    reported only."""
    arms = doc["arms"]
    lines = [
        f"rule: {doc['rule']}",
        f"{doc['states']} states from {doc['sessions']} sessions ({doc['clusters']} tasks), "
        f"{doc.get('samples_per_state', '?')} samples each, replies capped at {doc.get('cap_tokens', '?')} tokens",
        f"{'':26}" + "".join(f"{arm:>12}" for arm in arms),
    ]
    for key, name in (
        ("failure_rate", "FAILURES / sample"),
        ("call_error_rate", "  call errors"),
        ("premature_finish_rate", "  premature finish"),
        ("premature_answer_rate", "  answer, no call"),
    ):
        lines.append(f"{name:26}" + "".join(f"{arm.get(key, 0.0):>12.3f}" for arm in arms.values()))
    for kind in sorted({k for arm in arms.values() for k in arm["by_kind"]}):
        lines.append(f"    {kind:22}" + "".join(f"{arm['by_kind'].get(kind, 0):>12.3f}" for arm in arms.values()))
    lines.append("reported, not gated:")
    for key, name in (("call_rate", "  replies with a call"), ("finish_share", "  replies calling finish")):
        lines.append(f"{name:26}" + "".join(f"{arm.get(key, 0.0):>12.3f}" for arm in arms.values()))
    detectable = doc["detectable_change"]
    lines.append(
        "smallest detectable change (80% power): "
        + (f"n/a (fewer than {MIN_CLUSTERS} tasks, or no failure)" if detectable is None else f"{detectable:+.1%}")
        + ("  (underpowered for -30%)" if detectable is None or detectable < TARGET else "")
    )
    for arm, judged in (doc.get("changes") or {}).items():
        lines += render_judgement(arm, judged)
    repro = doc.get("reproduced") or {}
    if repro.get("checked"):
        lines.append(
            f"recorded calls drawn again: {repro.get('same_tokens', 0)}/{repro['checked']} same tokens, "
            f"{repro.get('same_label', 0)}/{repro.get('labels_checked', 0)} same label"
        )
    return "\n".join(lines)


def render_judgement(arm: str, judged: dict[str, Any]) -> list[str]:
    """An arm's outcome and every guard, each with its value, interval and verdict."""
    from tasks.gate import describe

    lines = [f"{arm}: failures per sample {describe(judged['failures'])}: {judged['outcome'].upper()}"]
    lines.append(f"  interval: {judged['failures']['method']}")
    for name, guard in judged["guards"].items():
        verdict = {True: "pass", False: "FAIL", None: "not measured"}[guard["pass"]]
        lines.append(f"  guard {name:20} {verdict:13} {guard['why']}")
    lines.append(f"  gate: {'promote' if judged['promote'] else 'keep'}")
    return lines


def gate(doc: dict[str, Any], *, after: str = "after", seed: int = 0) -> tuple[bool, str]:
    """Promote an adapter (the arm `after`) on a state replay, or not, and why (tasks.gate)."""
    from tasks.gate import gate as judge_gate

    return judge_gate(doc, after, seed=seed)
