"""`teachback stats`: how often the model fails, where, and how much of it became training data."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any, Protocol

from agent.protocol import FAILING_COMMAND, is_call_error
from feedback_store.redaction.redactor import Redactor


class Store(Protocol):
    """What the figures read of a store (feedback_store.store.Store, which imports this module to
    compute its stats: this module does not import it)."""

    path: Any

    def query(self, sql: str, params: tuple | list | dict = ()) -> list[dict[str, Any]]: ...


PAGE_ROWS = 2000
# The stored text an export carries: every message (prompts, completions, corrections) and every
# pair's feedback and hand-made correction.
EXPORTED_TEXT = (
    ("messages", "message"),
    ("pairs", "feedback"),
    ("pairs", "correction"),
)


def _rate(errors: int, calls: int) -> float:
    return round(errors / calls, 4) if calls else 0.0


def secret_counts(store: Store, redactor: Redactor | None = None) -> dict[str, int]:
    """How many values of each kind an export (with its default redaction) would redact. A text
    stored many times (a system prompt, a tool result repeated across sessions) is read once."""
    redactor = Redactor() if redactor is None else redactor
    found: Counter[str] = Counter()
    kinds_of: dict[bytes, tuple[str, ...]] = {}  # a text's digest -> the kinds found in it

    def kinds(text: str) -> tuple[str, ...]:
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        if key not in kinds_of:
            kinds_of[key] = tuple(kind for _, _, kind in redactor.find(text))
        return kinds_of[key]

    for table, column in EXPORTED_TEXT:
        last = 0
        while rows := store.query(
            f"SELECT rowid AS id, {column} AS text FROM {table} WHERE rowid > ? "
            f"AND {column} IS NOT NULL ORDER BY rowid LIMIT {PAGE_ROWS}",
            (last,),
        ):
            texts = (
                text
                for row in rows
                for text in _strings(json.loads(row["text"]) if table == "messages" else row["text"])
            )
            found.update(kind for text in texts for kind in kinds(text))
            last = rows[-1]["id"]
    return dict(sorted(found.items()))


def _strings(value: Any) -> Iterator[str]:
    """Every string in JSON-like data: what an export redacts one by one."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | dict):
        for item in value.values() if isinstance(value, dict) else value:
            yield from _strings(item)


# A command's exit status, for the calls whose command ran and failed: 126 and 127 say the shell could
# not run it (a call error).
EXIT_CODE = "CASE WHEN t.error_kind = 'exit_status' THEN t.exit_code END"


def compute_stats(store: Store) -> dict[str, Any]:
    """Calls and call errors (agent.protocol.is_call_error) by tool, model and kind; failing test
    runs (commands that ran and exited non-zero: not call errors); premature finishes (graded task
    sessions whose model called finish while the tests still failed); the pairs."""
    sessions = store.query("SELECT count(*) AS n FROM sessions")[0]["n"]
    flagged = store.query("SELECT count(DISTINCT session_id) AS n FROM flags")[0]["n"]
    calls = store.query(
        f"""
        SELECT t.name, s.model, t.error_kind, {EXIT_CODE} AS exit_code, count(*) AS calls,
               sum(t.status = 'error') AS errors
        FROM tool_calls t LEFT JOIN sessions s ON s.id = t.session_id
        WHERE t.status != 'running' GROUP BY t.name, s.model, t.error_kind, exit_code
        """
    )
    by_tool: dict[str, dict[str, Any]] = {}
    by_model: dict[str, dict[str, Any]] = {}
    by_kind: dict[str, int] = {}
    failing_tests = 0
    for row in calls:
        mistakes = row["errors"] if is_call_error(row["error_kind"], row["exit_code"]) else 0
        if row["error_kind"] == FAILING_COMMAND and not mistakes:
            failing_tests += row["errors"]
        for table, key in ((by_tool, row["name"] or "(none)"), (by_model, row["model"] or "(unknown)")):
            entry = table.setdefault(key, {"calls": 0, "call_errors": 0})
            entry["calls"] += row["calls"]
            entry["call_errors"] += mistakes
        if mistakes:
            by_kind[row["error_kind"]] = by_kind.get(row["error_kind"], 0) + mistakes
    for table in (by_tool, by_model):
        for entry in table.values():
            entry["call_error_rate"] = _rate(entry["call_errors"], entry["calls"])
    total_calls = sum(e["calls"] for e in by_tool.values())
    total_errors = sum(e["call_errors"] for e in by_tool.values())
    graded = store.query(
        """
        SELECT count(*) AS n, coalesce(sum(json_extract(s.config, '$.task.reward') < 1 AND EXISTS (
            SELECT 1 FROM tool_calls t WHERE t.session_id = s.id AND t.name = 'finish' AND t.status = 'ok'
        )), 0) AS premature
        FROM sessions s WHERE json_extract(s.config, '$.task.reward') IS NOT NULL
        """
    )[0]
    pairs = store.query(
        "SELECT source, count(*) AS n, sum(correction_seq IS NOT NULL OR correction IS NOT NULL) AS fixed "
        "FROM pairs GROUP BY source ORDER BY source"
    )
    pair_total = sum(r["n"] for r in pairs)
    corrected = sum(r["fixed"] for r in pairs)
    usage = store.query(
        "SELECT count(*) AS n, coalesce(sum(prompt_tokens), 0) AS prompt_tokens, "
        "coalesce(sum(completion_tokens), 0) AS completion_tokens, coalesce(sum(cost_usd), 0) AS cost_usd "
        "FROM model_calls"
    )[0]
    return {
        "database": str(store.path),
        "sessions": sessions,
        "flagged_sessions": flagged,
        "model_calls": usage["n"],
        "tokens": {"prompt": usage["prompt_tokens"], "completion": usage["completion_tokens"]},
        "cost_usd": round(usage["cost_usd"], 6),
        "tool_calls": total_calls,
        "call_errors": total_errors,
        "call_error_rate": _rate(total_errors, total_calls),
        "failing_test_runs": failing_tests,
        "graded_sessions": graded["n"],
        "premature_finishes": graded["premature"],
        # the headline of every learning measurement: call errors and premature finishes, per model call
        "failures": total_errors + graded["premature"],
        "failure_rate": _rate(total_errors + graded["premature"], usage["n"]),
        "call_error_rate_by_tool": dict(sorted(by_tool.items())),
        "call_errors_by_kind": {
            k: {"count": n, "share_of_calls": _rate(n, total_calls)} for k, n in sorted(by_kind.items())
        },
        "call_error_rate_by_model": dict(sorted(by_model.items())),
        "pairs": pair_total,
        "pairs_by_source": {r["source"]: r["n"] for r in pairs},
        "pairs_corrected": corrected,
        "share_corrected": _rate(corrected, pair_total),
        "secrets_by_kind": secret_counts(store),
    }


def format_stats(stats: dict[str, Any]) -> str:
    """The stats as a short text report."""
    lines = [
        f"Database: {stats['database']}",
        f"Sessions: {stats['sessions']} ({stats['flagged_sessions']} flagged by the monitor)",
        f"Model calls: {stats['model_calls']}  tokens in/out: {stats['tokens']['prompt']}/"
        f"{stats['tokens']['completion']}  cost: ${stats['cost_usd']:.4f}",
        f"Failures: {stats['failures']}"
        + (f" ({stats['failure_rate']:.1%} of model calls)" if stats["model_calls"] else "")
        + ": call errors and premature finishes together",
        f"Tool calls: {stats['tool_calls']}  call errors: {stats['call_errors']} ({stats['call_error_rate']:.1%})"
        f"  failing test runs: {stats['failing_test_runs']}",
    ]
    if stats["graded_sessions"]:
        lines.append(
            f"Premature finishes: {stats['premature_finishes']} of {stats['graded_sessions']} graded task sessions "
            "(finish called while the task's tests still failed)"
        )
    if stats["call_error_rate_by_tool"]:
        lines.append("Call-error rate by tool:")
        lines += [
            f"  {name:<16} {e['call_errors']:>6}/{e['calls']:<6} {e['call_error_rate']:.1%}"
            for name, e in stats["call_error_rate_by_tool"].items()
        ]
    if stats["call_errors_by_kind"]:
        lines.append("Call errors by kind:")
        lines += [
            f"  {kind:<16} {e['count']:>6}  {e['share_of_calls']:.1%} of calls"
            for kind, e in stats["call_errors_by_kind"].items()
        ]
    if stats["call_error_rate_by_model"]:
        lines.append("Call-error rate by model:")
        lines += [
            f"  {model:<40} {e['call_errors']:>6}/{e['calls']:<6} {e['call_error_rate']:.1%}"
            for model, e in stats["call_error_rate_by_model"].items()
        ]
    lines.append(
        f"Feedback pairs: {stats['pairs']}  with a correction: {stats['pairs_corrected']} "
        f"({stats['share_corrected']:.1%})"
    )
    lines += [f"  {source:<8} {n}" for source, n in stats["pairs_by_source"].items()]
    secrets = stats["secrets_by_kind"]
    lines.append(
        f"Secrets an export would redact: {sum(secrets.values())}"
        + (" (" + ", ".join(f"{kind}: {n}" for kind, n in secrets.items()) + ")" if secrets else "")
    )
    return "\n".join(lines)
