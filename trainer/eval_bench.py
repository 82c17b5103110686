"""The behaviour part of `teachback eval`: the agent with and without an adapter on held-out tasks,
run by `teachback bench`'s own machinery (sealed workspaces, grading, the same rates), and paired
percentile-bootstrap intervals over tasks for the differences of its rates. Lessons are off and
each side records to its own scratch database, so neither side learns from the other's failures.

Both sides are served by llama.cpp exactly as the agent serves users: the model strings are
`local/<model>@none` (or `@<baseline adapter>`) and `local/<model>@<adapter>`, so the recorded
sessions say which adapter answered.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # trainer.evaluate calls this module
    from trainer.evaluate import EvalConfig

RESAMPLES = 10_000
CONFIDENCE = 0.95
# rate: (numerator fields, denominator fields) summed over a task's attempts
# (call errors, failing test runs and premature finishes as tasks.bench defines them)
RATES = {
    "call_error_rate": (("call_errors",), ("tool_calls",)),
    "malformed_call_rate": (("malformed_calls",), ("tool_calls",)),
    "repeated_error_rate": (("repeated_errors",), ("call_errors",)),
    "premature_finish_rate": (("premature_finish",), ()),
    "failing_test_runs_per_attempt": (("failing_test_runs",), ()),
    "calls_per_attempt": (("tool_calls",), ()),
}


def behaviour(config: EvalConfig, base: str | None, say: Callable[[str], None]) -> dict[str, Any]:
    from agent.providers.llama_engine import PACKAGED_MODELS
    from tasks.bench import bench_document, compare, premature_finish, summarize, write_document
    from tasks.executors import ResultsFile, run_all, specs_for
    from tasks.records import load_tasks
    from tasks.sample_suite import sample_suite_path
    from trainer.gguf_lora import ensure_served, served_model

    gguf = served_model(config.serve, base)
    if gguf is None:
        return {
            "note": f"skipped: llama.cpp serves adapters only on a GGUF model; {base} is none (give --serve FILE.gguf)"
        }
    ensure_served(config.adapter, gguf)
    if config.baseline is not None:
        ensure_served(config.baseline, gguf)
    name = next((n for n in PACKAGED_MODELS if gguf.name == PACKAGED_MODELS[n][1]), str(gguf))
    models = {
        "before": f"local/{name}@{config.baseline.resolve() if config.baseline else 'none'}",
        "after": f"local/{name}@{config.adapter.resolve()}",
    }
    task_file = (config.tasks or sample_suite_path()).resolve()
    tasks = load_tasks(task_file)
    work = config.out.with_name(f"{config.out.stem}-bench")
    # No lessons: they would show the second side what the first side got wrong, and the comparison
    # is of the models alone.
    overrides = {
        "lessons": False,
        **{k: v for k, v in (("max_steps", config.max_steps), ("max_time", config.max_time)) if v is not None},
    }
    records: dict[str, list[dict[str, Any]]] = {}
    documents: dict[str, dict[str, Any]] = {}
    for side, model in models.items():
        results = ResultsFile(work / f"{side}.attempts.jsonl")
        if side == "before" and config.bench_cache is not None:  # the served model's attempts, kept across rounds
            key = f"{model}-{task_file.stem}-steps{config.max_steps}-time{config.max_time}-x{config.attempts}"
            results = ResultsFile(config.bench_cache / f"{slug(key)}.attempts.jsonl")
        specs = specs_for(
            tasks,
            config.attempts,
            task_file=str(task_file),
            model=model,
            db=str(work / f"{side}.db"),
            overrides=overrides,
        )

        def report(record: dict[str, Any], count: int, total: int, side: str = side) -> None:
            outcome = (
                record.get("error")
                or f"reward {record.get('reward', 0):g}, {record.get('call_errors', 0)} "
                f"call error(s) in {record.get('tool_calls', 0)} call(s)"
            )
            say(f"[{side} {count}/{total}] {record['instance_id']}: {outcome}")

        done = run_all(specs, results, parallel=config.parallel, on_result=report)
        records[side] = [{**r, "premature_finish": int(premature_finish(r))} for r in done]
        documents[side] = bench_document(
            summarize(records[side], config.attempts),
            model=model,
            suite=task_file.stem,
            tasks_file=str(task_file),
            results=str(results.path),
        )
        write_document(documents[side], work / f"bench-{side}.json")
    comparison = compare(documents["before"], documents["after"], seed=config.seed)
    rates = {
        key: paired_rate(records["before"], records["after"], num, den, seed=config.seed)
        for key, (num, den) in RATES.items()
    }
    rates["pass@1"] = {
        "before": comparison["mean_a"],
        "after": comparison["mean_b"],
        "diff_ci": comparison["ci"],
        "tasks": len(comparison["rows"]),
    }
    return {
        "models": models,
        "tasks_file": str(task_file),
        "bench": {s: str(work / f"bench-{s}.json") for s in models},
        "summary": {side: doc["summary"] for side, doc in documents.items()},
        "rates": rates,
        "compare": {k: v for k, v in comparison.items() if k != "rows"},
    }


def paired_rate(
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    numerator: tuple[str, ...],
    denominator: tuple[str, ...],
    *,
    seed: int = 0,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
) -> dict[str, Any]:
    """A rate (sum of numerators over sum of denominators; with no denominator fields, per
    attempt) before and after, over the tasks both sides ran, with percentile bootstrap intervals
    of after − before and of after / before − 1, resampling tasks (paired)."""
    import numpy as np

    sums = {side: _per_task(records, numerator, denominator) for side, records in (("b", before), ("a", after))}
    common = sorted(set(sums["b"]) & set(sums["a"]))
    if not common:
        return {"before": 0.0, "after": 0.0, "diff_ci": None, "relative": None, "relative_ci": None, "tasks": 0}
    arrays = {side: np.array([sums[side][task] for task in common], dtype=float) for side in sums}
    picks = np.random.default_rng(seed).integers(0, len(common), size=(resamples, len(common)))

    def rate(values: Any, axis: int | None = None) -> Any:
        num, den = values[..., 0].sum(axis=axis), values[..., 1].sum(axis=axis)
        return np.divide(num, den, out=np.zeros_like(num, dtype=float), where=den > 0)

    point_b, point_a = float(rate(arrays["b"])), float(rate(arrays["a"]))
    boot_b, boot_a = rate(arrays["b"][picks], axis=1), rate(arrays["a"][picks], axis=1)
    tail = (1 - confidence) / 2
    diff_ci = [float(q) for q in np.quantile(boot_a - boot_b, [tail, 1 - tail])]
    relative = relative_ci = None
    if point_b > 0:
        relative = point_a / point_b - 1
        usable = boot_b > 0
        relative_ci = [float(q) for q in np.quantile(boot_a[usable] / boot_b[usable] - 1, [tail, 1 - tail])]
    return {
        "before": point_b,
        "after": point_a,
        "diff_ci": diff_ci,
        "relative": relative,
        "relative_ci": relative_ci,
        "tasks": len(common),
    }


def _per_task(
    records: list[dict[str, Any]], numerator: tuple[str, ...], denominator: tuple[str, ...]
) -> dict[str, tuple[float, float]]:
    """{task: (numerator sum, denominator sum)} over the attempts whose harness did not fail."""
    found: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for record in records:
        if record.get("error"):
            continue
        entry = found[record["instance_id"]]
        entry[0] += sum(float(record.get(k) or 0) for k in numerator)
        entry[1] += sum(float(record.get(k) or 0) for k in denominator) if denominator else 1.0
    return {task: (n, d) for task, (n, d) in found.items()}


def slug(text: str) -> str:
    """A short file-name part for `text`: its readable end and a hash of the whole."""
    import hashlib

    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', text).strip('-')[-60:]}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"
