"""The numbers a learning claim is judged by, fixed before any run: what a failure is, the interval
of a paired change, the rule that reads it, and the smallest change a design can detect.

A *failure* is a call error (of any kind) or a premature stop: a `finish` while the task's tests
fail, or an answer without a call at a task state (the turn would end unsolved). Both arms of a
comparison are sampled at the same states under the same seeds, so their samples are matched pairs;
the states are grouped by task (a cluster).

The interval of a change is the hull of two intervals, each honest where the other is not:
- a paired bootstrap that resamples tasks (it sees that samples of one task are alike), on rates
  with a continuity correction of half an event per arm, so that every resample is defined and none
  is dropped, and an arm with no event does not collapse it to one point;
- an exact interval from the matched samples (Clopper-Pearson on the discordant ones, and on how
  many there could be), which stays wide where events are few.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

TARGET = -0.30  # the relative change in failures a learning round is meant to reach
CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
Z_ALPHA, Z_POWER = 1.959964, 0.841621  # two-sided 5%, 80% power
RESAMPLES = 2_000
MIN_CLUSTERS = 5  # fewer tasks than this: the bootstrap is left out and the exact interval stands alone
METHOD = (
    "hull of a paired bootstrap over tasks (rates corrected by half an event per arm, no resample dropped) "
    "and an exact matched-pairs interval (Clopper-Pearson on the discordant samples)"
)
RULE = (
    "target met: the 95% interval of the relative change in failures per sample lies below zero and the "
    "change is <= -30%; effect shown: the interval lies below zero; target refuted: the interval's lower "
    "end is above -30%; otherwise inconclusive"
)
OUTCOMES = ("target met", "effect shown", "target refuted", "inconclusive")
PREMATURE_KINDS = ("premature_finish", "answer")  # stops that leave a task state unsolved


def is_failure(label: Any) -> bool:
    """A call error or a premature stop (a tasks.states.Label at a task state)."""
    return bool(label.call_error) or label.kind in PREMATURE_KINDS


@dataclass(frozen=True)
class Pair:
    """One matched sample: the same state and seed in both arms."""

    cluster: str
    before: bool
    after: bool


def pairs_of(clusters: Sequence[str], before: Sequence[Sequence[bool]], after: Sequence[Sequence[bool]]) -> list[Pair]:
    """Matched samples from per-state lists of outcomes (state i of `clusters`, sample k in both)."""
    out = []
    for cluster, b, a in zip(clusters, before, after, strict=True):
        if len(b) != len(a):
            raise ValueError(f"the arms drew {len(b)} and {len(a)} samples at one state: they must match")
        out += [Pair(cluster, x, y) for x, y in zip(b, a, strict=True)]
    return out


# ---------------------------------------------------------------------------------------------
# The relative change in a rate (failures), and the rule


def relative_change(pairs: Sequence[Pair], seed: int = 0) -> dict[str, Any]:
    """after / before - 1 of the event rate, its interval and the outcome by RULE."""
    n = len(pairs)
    b = sum(p.before for p in pairs)
    a = sum(p.after for p in pairs)
    point = None if not b else a / b - 1
    exact = exact_ratio(pairs)
    boot = _bootstrap(pairs, seed, _log_ratio)
    if boot is not None:
        boot = [math.exp(boot[0]) - 1, math.exp(boot[1]) - 1]
    interval = _hull(exact, boot) if a + b else None  # no event in either arm: nothing to compare
    return {
        "samples": n,
        "tasks": len({p.cluster for p in pairs}),
        "events": {"before": b, "after": a},
        "before": b / n if n else None,
        "after": a / n if n else None,
        "relative_change": point,
        "interval": _bounded(interval),
        "intervals": {"exact": _bounded(exact), "bootstrap": boot},
        "method": METHOD if boot is not None else METHOD.split(" and ")[-1] + " (too few tasks to bootstrap)",
        "outcome": outcome(point, interval),
    }


def outcome(point: float | None, interval: Sequence[float] | None) -> str:
    """Exactly one of OUTCOMES, by RULE (an upper end of None is unbounded)."""
    if interval is None:
        return "inconclusive"
    low, high = interval[0], math.inf if interval[1] is None else interval[1]
    if high < 0 and point is not None and point <= TARGET:
        return "target met"
    if high < 0:
        return "effect shown"
    if low > TARGET:
        return "target refuted"
    return "inconclusive"


def exact_ratio(pairs: Sequence[Pair]) -> list[float] | None:
    """The exact matched-pairs interval of after/before - 1. With `both` samples failing in both arms
    and d discordant ones, of which c fail only after, the ratio is (both + c) / (both + d - c):
    Clopper-Pearson bounds c/d, and d is also taken at its own upper bound, so that arms that agree
    on a handful of samples do not read as certainty. None when no sample has an event."""
    n = len(pairs)
    both = sum(p.before and p.after for p in pairs)
    only_after = sum(p.after and not p.before for p in pairs)
    d = sum(p.before != p.after for p in pairs)
    if not n or (not both and not d):
        return None
    share = clopper_pearson(only_after, d) if d else (0.0, 1.0)
    ratios = []
    for discordant in (d, n * clopper_pearson(d, n)[1]):
        for pi in share:
            up, down = both + discordant * pi, both + discordant * (1 - pi)
            ratios.append(math.inf if down <= 0 else up / down)
    low, high = min(ratios), max(ratios)
    return [low - 1, high - 1 if math.isfinite(high) else math.inf]


# ---------------------------------------------------------------------------------------------
# The difference in a rate (the guards: points, with a margin)


def difference(pairs: Sequence[Pair], seed: int = 0) -> dict[str, Any]:
    """after - before of the event rate (points), its interval (the same hull as relative_change)."""
    n = len(pairs)
    if not n:
        return {"samples": 0, "before": None, "after": None, "difference": None, "interval": None}
    b = sum(p.before for p in pairs) / n
    a = sum(p.after for p in pairs) / n
    interval = _hull(exact_difference(pairs), _bootstrap(pairs, seed, _difference))
    return {"samples": n, "before": b, "after": a, "difference": a - b, "interval": interval}


def exact_difference(pairs: Sequence[Pair]) -> list[float]:
    """The exact matched-pairs interval of after - before: (c - (d - c)) / n with Clopper-Pearson on
    c/d, d taken at its observed value and at its upper bound (with no discordant sample, the
    difference could still be as large as that bound)."""
    n = len(pairs)
    only_after = sum(p.after and not p.before for p in pairs)
    d = sum(p.before != p.after for p in pairs)
    share = clopper_pearson(only_after, d) if d else (0.0, 1.0)
    values = [k * (2 * pi - 1) / n for k in (d, n * clopper_pearson(d, n)[1]) for pi in share]
    return [min(values), max(values)]


# ---------------------------------------------------------------------------------------------
# Power


def detectable_change(pairs_before: Sequence[tuple[str, bool]], seed: int = 0) -> float | None:
    """The smallest relative drop in the rate this design could detect at 80% power (two-sided 5%),
    from the base arm's spread over tasks (corrected rates), as if the arms were independent (pairing
    only narrows the interval). None with fewer than MIN_CLUSTERS tasks or no event."""
    cells: dict[str, list[int]] = {}
    for cluster, event in pairs_before:
        cell = cells.setdefault(cluster, [0, 0])
        cell[0] += event
        cell[1] += 1
    names = sorted(cells)
    if len(names) < MIN_CLUSTERS or not any(c[0] for c in cells.values()):
        return None
    rng = random.Random(seed)
    logs = []
    for _ in range(RESAMPLES):
        pick = [cells[rng.choice(names)] for _ in names]
        logs.append(math.log((sum(c[0] for c in pick) + 0.5) / (sum(c[1] for c in pick) + 1)))
    mean = sum(logs) / len(logs)
    se = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)) * math.sqrt(2)
    if se < 1e-9:  # every task failed every sample (or none did): no spread to read; the design's own figure
        samples = sum(c[1] for c in cells.values())
        rate = sum(c[0] for c in cells.values()) / samples
        return planned_detectable(len(names), round(samples / len(names)), min(max(rate, 0.05), 0.95))
    return math.exp(-(Z_ALPHA + Z_POWER) * se) - 1


def planned_detectable(tasks: int, samples_per_task: int, base_rate: float = 0.6, icc: float = 0.2) -> float | None:
    """The same figure before anything is sampled, from the design alone: `tasks` held-out tasks of
    `samples_per_task` samples each, an assumed base failure rate and intra-task correlation."""
    n = tasks * samples_per_task
    if tasks < MIN_CLUSTERS or n == 0 or not 0 < base_rate < 1:
        return None
    design_effect = 1 + (samples_per_task - 1) * icc
    se = math.sqrt((1 - base_rate) / (base_rate * n) * design_effect) * math.sqrt(2)
    return math.exp(-(Z_ALPHA + Z_POWER) * se) - 1


# ---------------------------------------------------------------------------------------------
# Pieces


def clopper_pearson(k: int, n: int, alpha: float = ALPHA) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a binomial proportion, k successes in n trials."""
    if n <= 0:
        return 0.0, 1.0
    lower = 0.0 if k <= 0 else _solve(lambda p: _tail(k, n, p, upper=True), alpha / 2, increasing=True)
    upper = 1.0 if k >= n else _solve(lambda p: _tail(k, n, p, upper=False), alpha / 2, increasing=False)
    return lower, upper


def _tail(k: int, n: int, p: float, upper: bool) -> float:
    """P(X >= k) when `upper`, else P(X <= k), for X ~ Binomial(n, p)."""
    terms = range(k, n + 1) if upper else range(0, k + 1)
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in terms)


def _solve(tail, target: float, increasing: bool) -> float:
    low, high = 0.0, 1.0
    for _ in range(60):  # bisection on a monotone tail
        mid = (low + high) / 2
        above = tail(mid) > target
        low, high = (low, mid) if above == increasing else (mid, high)
    return (low + high) / 2


def _log_ratio(n: int, b: int, a: int) -> float:
    return math.log((a + 0.5) / (b + 0.5))  # both rates over n + 1: the denominators cancel


def _difference(n: int, b: int, a: int) -> float:
    return (a - b) / n


def _bootstrap(pairs: Sequence[Pair], seed: int, statistic) -> list[float] | None:
    """Percentile interval of `statistic(samples, events before, events after)` over resamples of
    whole tasks; None with too few tasks."""
    cells: dict[str, list[int]] = {}
    for pair in pairs:
        cell = cells.setdefault(pair.cluster, [0, 0, 0])
        cell[0] += 1
        cell[1] += pair.before
        cell[2] += pair.after
    names = sorted(cells)
    if len(names) < MIN_CLUSTERS:
        return None
    rng = random.Random(seed)
    columns = [[cells[name][i] for name in names] for i in range(3)]
    draws = []
    for _ in range(RESAMPLES):
        pick = rng.choices(range(len(names)), k=len(names))
        draws.append(statistic(*(sum(column[i] for i in pick) for column in columns)))
    draws.sort()
    tail = ALPHA / 2
    return [draws[int(tail * (RESAMPLES - 1))], draws[int((1 - tail) * (RESAMPLES - 1))]]


def _bounded(interval: list[float] | None) -> list[float | None] | None:
    """An interval as JSON holds it: an unbounded upper end is None."""
    if interval is None:
        return None
    return [interval[0], interval[1] if math.isfinite(interval[1]) else None]


def _hull(*intervals: Sequence[float] | None) -> list[float] | None:
    found = [i for i in intervals if i is not None]
    if not found:
        return None
    return [min(i[0] for i in found), max(i[1] for i in found)]
