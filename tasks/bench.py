"""`teachback bench`: the score of a model on a task suite, and the paired difference of two runs.

A pass is an attempt with reward 1 that the monitor did not flag: a flagged attempt keeps its reward
in the results file and the bench JSON, and is counted apart. Rates:
- call-error rate: calls that failed because of the call (agent.protocol.is_call_error: a wrong
  path or text, bad arguments, an unknown tool, a repeat, a refusal, a command that cannot run, ...)
  / tool calls. A failing test run is not a call error; it is counted apart (failing test runs);
- malformed-call rate: unknown tools, unparseable or ill-typed arguments / tool calls (a part of
  the call errors);
- repeated-error rate: call errors that repeat an earlier one of the same kind on the same tool and
  target in the same session / call errors;
- premature-finish rate: attempts whose model called finish while the task's tests still failed /
  attempts.
Attempts whose harness failed (`error` in the record) are left out of every figure and counted.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from math import comb
from pathlib import Path
from typing import Any

FORMAT = "teachback-bench-1"
RESAMPLES = 10_000
CONFIDENCE = 0.95


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k from n attempts with c passes (Chen et al., 2021)."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} attempts per task, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def passed(record: dict[str, Any]) -> bool:
    return float(record.get("reward") or 0.0) >= 1.0 and not record.get("flags")


def premature_finish(record: dict[str, Any]) -> bool:
    """The model called finish (and the call succeeded) while the task's graded tests still fail."""
    return bool(record.get("finish_called")) and float(record.get("reward") or 0.0) < 1.0


def summarize(records: list[dict[str, Any]], k: int | None = None) -> dict[str, Any]:
    """Per-task figures and the overall ones for a run's result records."""
    usable = [r for r in records if not r.get("error")]
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for record in usable:
        by_task[record["instance_id"]].append(record)
    k = k or min((len(rs) for rs in by_task.values()), default=1)
    tasks = {task: _task_figures(rs, k) for task, rs in sorted(by_task.items())}
    calls = sum(r.get("tool_calls", 0) for r in usable)
    errors = sum(r.get("call_errors", 0) for r in usable)
    flagged = [r for r in usable if r.get("flags")]
    attempts = len(usable)
    overall = {
        "tasks": len(tasks),
        "attempts": attempts,
        "k": k,
        "pass@1": _mean([t["pass@1"] for t in tasks.values()]),
        f"pass@{k}": _mean([t[f"pass@{k}"] for t in tasks.values()]),
        "pass@1_ci": bootstrap_ci([t["pass@1"] for t in tasks.values()]),
        "tool_calls": calls,
        "call_errors": errors,
        "malformed_calls": sum(r.get("malformed_calls", 0) for r in usable),
        "repeated_errors": sum(r.get("repeated_errors", 0) for r in usable),
        "failing_test_runs": sum(r.get("failing_test_runs", 0) for r in usable),
        "premature_finishes": sum(1 for r in usable if premature_finish(r)),
        "steps": _mean([r.get("steps", 0) for r in usable]),
        "prompt_tokens": _mean([r.get("prompt_tokens", 0) for r in usable]),
        "completion_tokens": _mean([r.get("completion_tokens", 0) for r in usable]),
        "cost_usd": sum(r.get("cost_usd", 0.0) for r in usable),
        "wall_s": _mean([r.get("wall_s", 0.0) for r in usable]),
        "agent_s": _mean([r.get("agent_s", 0.0) for r in usable]),
        "grade_s": _mean([r.get("grade_s", 0.0) for r in usable]),
        "flagged": len(flagged),
        "flagged_rewarded": sum(1 for r in flagged if float(r.get("reward") or 0) >= 1),
        "flag_rules": dict(Counter(rule for r in flagged for rule in r["flags"])),
        "harness_errors": len(records) - attempts,
    }
    overall["call_error_rate"] = _ratio(errors, calls)
    overall["malformed_call_rate"] = _ratio(overall["malformed_calls"], calls)
    overall["repeated_error_rate"] = _ratio(overall["repeated_errors"], errors)
    overall["premature_finish_rate"] = _ratio(overall["premature_finishes"], attempts)
    # The headline (tasks.verdict): call errors and premature finishes together, per model reply.
    replies = sum(r.get("steps", 0) for r in usable)
    overall["failures"] = errors + overall["premature_finishes"]
    overall["failure_rate"] = _ratio(overall["failures"], replies)
    return {"summary": overall, "tasks": tasks}


def _task_figures(records: list[dict[str, Any]], k: int) -> dict[str, Any]:
    n, c = len(records), sum(1 for r in records if passed(r))
    ordered = sorted(records, key=lambda r: r["attempt"])
    return {
        "attempts": n,
        "passes": c,
        "pass@1": c / n,
        f"pass@{k}": pass_at_k(n, c, min(k, n)),
        "rewards": [r.get("reward") for r in ordered],
        "f2p_pass_fraction": _mean([r.get("f2p_pass_fraction") or 0.0 for r in records]),
        "p2p_pass_fraction": _mean([r.get("p2p_pass_fraction") or 0.0 for r in records]),
        "flags": [r.get("flags") or [] for r in ordered],
        "sessions": [r.get("session_id") for r in ordered],
    }


def bootstrap_ci(
    values: list[float], *, seed: int = 0, resamples: int = RESAMPLES, confidence: float = CONFIDENCE
) -> list[float] | None:
    """A percentile bootstrap interval for the mean of `values` (resampling them, seeded)."""
    if not values:
        return None
    import numpy as np

    data = np.asarray(values, dtype=float)
    picks = np.random.default_rng(seed).integers(0, len(data), size=(resamples, len(data)))
    means = data[picks].mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return [float(low), float(high)]


def bench_document(result: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"format": FORMAT, **meta, **result}


def write_document(document: dict[str, Any], path: str | Path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def load_document(path: str | Path) -> dict[str, Any]:
    """A bench JSON file; a ValueError says what is wrong with it."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON ({exc}); give a file written by `teachback bench`") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("tasks"), dict):
        raise ValueError(f"{path} is not a `teachback bench` result ({FORMAT}); give the JSON file bench wrote")
    return data


def render_table(document: dict[str, Any]) -> str:
    """The run as one Markdown table."""
    s = document["summary"]
    k = s["k"]
    ci = s.get("pass@1_ci")
    rows = [
        ("model", f"`{document.get('model', '?')}`" + (" with lessons" if document.get("lessons") else "")),
        (
            "tasks × attempts",
            f"{s['tasks']} × {k}" + (f" ({s['attempts']} attempts)" if s["attempts"] != s["tasks"] * k else ""),
        ),
        ("pass@1", f"{s['pass@1']:.3f}" + (f" (95% CI {ci[0]:.3f}–{ci[1]:.3f})" if ci else "")),
    ]
    if k > 1:
        rows.append((f"pass@{k}", f"{s[f'pass@{k}']:.3f}"))
    rows += [
        (
            "failures / reply",
            f"{_percent(s['failure_rate'])} ({s['failures']}: call errors and premature finishes)",
        ),
        ("call-error rate", f"{_percent(s['call_error_rate'])} ({s['call_errors']}/{s['tool_calls']} calls)"),
        (
            "malformed-call rate",
            f"{_percent(s['malformed_call_rate'])} ({s['malformed_calls']}/{s['tool_calls']} calls)",
        ),
        (
            "repeated-error rate",
            f"{_percent(s['repeated_error_rate'])} ({s['repeated_errors']}/{s['call_errors']} call errors)",
        ),
        ("failing test runs", f"{_ratio(s['failing_test_runs'], s['attempts']):.1f} / attempt (not call errors)"),
        (
            "premature finishes",
            f"{_percent(s['premature_finish_rate'])} ({s['premature_finishes']}/{s['attempts']} attempts)",
        ),
        ("steps / attempt", f"{s['steps']:.1f}"),
        (
            "tokens / attempt",
            f"{s['prompt_tokens'] + s['completion_tokens']:,.0f} "
            f"({s['prompt_tokens']:,.0f} prompt + {s['completion_tokens']:,.0f} completion)",
        ),
        ("cost", f"${s['cost_usd']:.4f} (${_ratio(s['cost_usd'], s['attempts']):.4f} / attempt)"),
        (
            "wall time / attempt",
            f"{s['wall_s']:.1f} s (agent {s['agent_s']:.1f} s, tests {s['grade_s']:.1f} s)"
            + (f"; run {document['run_s']:.0f} s" if document.get("run_s") else ""),
        ),
        ("flagged attempts", _flagged(s)),
    ]
    if s["harness_errors"]:
        rows.append(("harness errors", f"{s['harness_errors']} (left out; they run again when the bench is resumed)"))
    width = max(len(name) for name, _ in rows)
    lines = [f"| {'metric'.ljust(width)} | value |", f"|{'-' * (width + 2)}|-------|"]
    lines += [f"| {name.ljust(width)} | {value} |" for name, value in rows]
    return "\n".join(lines)


def _flagged(s: dict[str, Any]) -> str:
    if not s["flagged"]:
        return "0"
    rules = ", ".join(f"{rule} ×{count}" for rule, count in sorted(s["flag_rules"].items()))
    return f"{s['flagged']} ({s['flagged_rewarded']} rewarded, not counted as passes): {rules}"


def compare(
    a: dict[str, Any], b: dict[str, Any], *, seed: int = 0, resamples: int = RESAMPLES, confidence: float = CONFIDENCE
) -> dict[str, Any]:
    """B − A in pass@1, task by task over the tasks both ran, with a bootstrap interval of the mean."""
    common = sorted(set(a["tasks"]) & set(b["tasks"]))
    rows = [{"task": t, "a": a["tasks"][t]["pass@1"], "b": b["tasks"][t]["pass@1"]} for t in common]
    for row in rows:
        row["diff"] = row["b"] - row["a"]
    diffs = [row["diff"] for row in rows]
    return {
        "rows": rows,
        "mean_a": _mean([r["a"] for r in rows]),
        "mean_b": _mean([r["b"] for r in rows]),
        "mean_diff": _mean(diffs),
        "ci": bootstrap_ci(diffs, seed=seed, resamples=resamples, confidence=confidence),
        "confidence": confidence,
        "resamples": resamples,
        "seed": seed,
        "better": sum(1 for d in diffs if d > 0),
        "worse": sum(1 for d in diffs if d < 0),
        "only_a": sorted(set(a["tasks"]) - set(b["tasks"])),
        "only_b": sorted(set(b["tasks"]) - set(a["tasks"])),
        "models": (a.get("model"), b.get("model")),
        "lessons": (bool(a.get("lessons")), bool(b.get("lessons"))),
    }


def render_compare(result: dict[str, Any], names: tuple[str, str] = ("A", "B")) -> str:
    a, b = names
    width = max([len("mean"), *(len(r["task"]) for r in result["rows"])])
    lines = [
        f"| {'task'.ljust(width)} | {a} pass@1 | {b} pass@1 | {b} − {a} |",
        f"|{'-' * (width + 2)}|---------:|---------:|------:|",
    ]
    lines += [f"| {r['task'].ljust(width)} | {r['a']:.3f} | {r['b']:.3f} | {r['diff']:+.3f} |" for r in result["rows"]]
    ci = result["ci"]
    span = f" ({result['confidence']:.0%} CI {ci[0]:+.3f} to {ci[1]:+.3f})" if ci else ""
    lines.append(
        f"| {'mean'.ljust(width)} | {result['mean_a']:.3f} | {result['mean_b']:.3f} | "
        f"{result['mean_diff']:+.3f}{span} |"
    )
    ties = len(result["rows"]) - result["better"] - result["worse"]
    runs = zip(names, result["models"], result["lessons"])
    notes = [
        "; ".join(f"{side}: `{model or '?'}`{' with lessons' if lessons else ''}" for side, model, lessons in runs),
        f"{len(result['rows'])} paired tasks: {b} better on {result['better']}, worse on {result['worse']}, "
        f"tied on {ties}; percentile bootstrap over tasks, {result['resamples']:,} resamples, seed {result['seed']}.",
    ]
    for side, missing in ((a, result["only_a"]), (b, result["only_b"])):
        if missing:
            notes.append(f"Only in {side} (left out): {', '.join(missing)}")
    return "\n".join(lines) + "\n\n" + "\n".join(notes)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _ratio(part: float, whole: float) -> float:
    return part / whole if whole else 0.0


def _percent(value: float) -> str:
    return f"{value:.1%}"
