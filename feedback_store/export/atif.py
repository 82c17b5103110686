"""`teachback export --format atif`: whole sessions in the Agent Trajectory Interchange Format
(ATIF v1.7, Harbor's trajectory format, which NVIDIA's agent toolkit and VS Code Copilot Chat write).

`--out PATH` ending in `.jsonl` gets one trajectory per line; any other PATH is a folder with one
`<session id>.json` per session, as Harbor keeps a trajectory per file. Steps follow the recorded
conversation: the system prompt, each user message, and each assistant reply as an agent step (one
model call: `llm_call_count` 1) with its tool calls and, as its observation, the results those calls
got; each result's `extra` says whether the call failed, how (teachback's error kind) and the exit
status of a command, so a reader need not guess it from the text. The session's tool schemas are the
agent's `tool_definitions`. Token counts, and the token ids and logprobs the embedded model sampled,
are the step's metrics where they were recorded. ATIF keeps anything else in `extra`: a step's
feedback pairs (what failed there, the feedback, the step that corrected it), and the trajectory's
provenance, format name and, for a graded task attempt, its task and reward. Text is redacted like
every export; token ids that would spell out a redacted secret are left out.

v1.7 against v1.6 (Harbor's RFC 0001 and its models): `extra` on tool calls and observation results,
`llm_call_count` on steps, `trajectory_id` and embedded `subagent_trajectories` on the trajectory,
`session_id` optional, and a subagent reference resolved by `trajectory_id` or `trajectory_path`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from feedback_store.content.hashing import canonical_json
from feedback_store.content.renders import Renders
from feedback_store.errors import StoreError
from feedback_store.export.card import CardInfo, write_card
from feedback_store.export.export_io import Sink
from feedback_store.export.folder_sink import TrajectoryFolder
from feedback_store.export.format_table import TRAJECTORIES
from feedback_store.export.unroot import Unrooted, unrooted
from feedback_store.read_only import open_read_only
from feedback_store.redaction.redactor import Redactor
from feedback_store.store import Store, parse_since
from feedback_store.team.provenance import Origins, content_key
from feedback_store.team.sharing import resolve

SCHEMA_VERSION = "ATIF-v1.7"


def export_atif(
    db_paths: Sequence[str | Path],
    out_path: str | Path,
    *,
    redact: bool = True,
    include_flagged: bool = False,
    shared_only: bool = False,
    model: str | None = None,
    since: float | str | None = None,
    command: str = "",
) -> tuple[int, dict[str, int], Path, Path]:
    """Write one trajectory per session; return (trajectories, left out by reason, file, card)."""
    out = Path(out_path).expanduser()
    redactor = Redactor() if redact else None
    left: Counter[str] = Counter()
    seen: set[str] = set()
    with ExitStack() as stack:
        stores = [stack.enter_context(open_read_only(p)) for p in db_paths]
        sink = stack.enter_context(Sink(out, parquet=False) if out.suffix == ".jsonl" else TrajectoryFolder(out))
        scrub = unrooted(redactor, stores)  # the workspace folders as the placeholder root, then redaction
        for store in stores:
            shares = resolve(store.query) if shared_only else {}
            for session_id in exported_sessions(store, include_flagged, model, since):
                if shared_only and not shares[session_id].shared:
                    left[shares[session_id].reason] += 1
                    continue
                record = trajectory(store, session_id, scrub)
                key = record["extra"]["provenance"]["content_hash"]
                if key in seen:
                    left["duplicates (the same session in several databases)"] += 1
                    continue
                seen.add(key)
                sink.add(record)
        if not len(sink):
            raise StoreError(
                "Nothing to export: no session matched"
                + (f" (left out: {', '.join(f'{n} {r}' for r, n in left.items())})" if left else "")
                + ". Record or import sessions first, or change the filters. No file was written."
            )
        count = len(sink)
        sink.finish()
        # inside the sink's block: should the card fail, the file just written is taken back
        card = write_card(
            out,
            CardInfo(
                fmt=TRAJECTORIES.kind,
                format_name=f"{TRAJECTORIES.name} ({SCHEMA_VERSION})",
                files={out.name if out.suffix == ".jsonl" else f"{out.name}/": count},
                test_fraction=0,
                template="the recorded conversation",
                compact_tools=False,
                redact=redact,
                redacted_kinds=dict(redactor.counts) if redactor else {},
                by_source={},
                by_kind={},
                left_out=dict(left),
                command=command,
            ),
        )
    return count, dict(left), out, card


def exported_sessions(store: Store, include_flagged: bool, model: str | None, since: float | str | None) -> list[str]:
    where, params = ["1 = 1"], []
    if not include_flagged:
        where.append("NOT EXISTS (SELECT 1 FROM flags f WHERE f.session_id = s.id)")
    if model is not None:
        where.append("s.model = ?")
        params.append(model)
    if since is not None:
        where.append("s.started_at >= ?")
        params.append(parse_since(since))
    rows = store.query(f"SELECT s.id FROM sessions s WHERE {' AND '.join(where)} ORDER BY s.id", params)
    return [r["id"] for r in rows if store.query("SELECT 1 FROM messages WHERE session_id = ? LIMIT 1", (r["id"],))]


def trajectory(store: Store, session_id: str, redactor: Redactor | Unrooted | None) -> dict[str, Any]:
    rows = store.query(
        """SELECT m.seq, m.message, e.ts, e.type, t.call_id
           FROM messages m LEFT JOIN events e ON e.id = m.event_id
             LEFT JOIN tool_calls t ON t.finished_id = m.event_id AND e.type = 'tool_call_finished'
           WHERE m.session_id = ? ORDER BY m.seq""",
        (session_id,),
    )
    raw = [json.loads(r["message"]) for r in rows]
    content = hashlib.sha256(canonical_json(raw).encode("utf-8")).hexdigest()
    messages = [redactor.redact_value(m) for m in raw] if redactor else raw
    usage = _usage(store, session_id)
    renders = Renders(store)
    pairs = _pairs(store, session_id, redactor)
    session = store.query("SELECT model, tools_hash, config FROM sessions WHERE id = ?", (session_id,))[0]
    outcomes = _outcomes(store, session_id)
    steps: list[dict[str, Any]] = []
    redacted_before = False
    results = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    step_of: dict[int, int] = {}
    for row, original, message in zip(rows, raw, messages, strict=True):
        role, text = message.get("role"), _text(message.get("content"))
        changed = message != original
        if role == "tool":
            redacted_before = redacted_before or changed
            continue
        if role == "system" and not text:
            continue
        if role == "user" and row["type"] == "tool_call_finished" and steps and steps[-1]["source"] == "agent":
            # a reply that could not be read as a call: the feedback is what the agent step got back
            observed = steps[-1].setdefault("observation", {"results": []})["results"]
            observed.append({"content": text, "extra": outcomes.get(row["call_id"], {"ok": False})})
            step_of[row["seq"]] = steps[-1]["step_id"]
            redacted_before = redacted_before or changed
            continue
        step: dict[str, Any] = {"step_id": len(steps) + 1, "source": {"assistant": "agent"}.get(role, role)}
        if step["source"] not in ("system", "user", "agent"):
            step["source"] = "user"
        if row["ts"] is not None:
            step["timestamp"] = dt.datetime.fromtimestamp(row["ts"], dt.UTC).isoformat().replace("+00:00", "Z")
        step["message"] = text
        if step["source"] == "agent":
            _agent_step(step, message, results, outcomes, session["model"])
            render = renders.at(session_id, row["seq"])
            metrics = _metrics(usage.get(row["seq"]), render, prompt_clean=not redacted_before, reply_clean=not changed)
            if metrics:
                step["metrics"] = metrics
            if row["seq"] in pairs:
                step["extra"] = {"feedback_pairs": pairs[row["seq"]]}
        step_of[row["seq"]] = step["step_id"]
        redacted_before = redacted_before or changed
        steps.append(step)
    for listed in pairs.values():  # a correction named by the step that made it
        for pair in listed:
            pair["correction_step"] = step_of.get(pair.pop("correction_seq"))
    origin = Origins(store).of(session_id, content_key(content))
    tools = json.loads(store.blob(session["tools_hash"]) or "[]") if session["tools_hash"] else []
    totals = [u for u in usage.values()]
    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": session_id,
        "agent": {
            "name": origin["agent"],
            "version": origin["agent_version"] or "unknown",
            "model_name": session["model"],
            "tool_definitions": redactor.redact_value(tools) if redactor else tools,
        },
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": sum(u["prompt_tokens"] or 0 for u in totals),
            "total_completion_tokens": sum(u["completion_tokens"] or 0 for u in totals),
            "total_cost_usd": sum(u["cost_usd"] or 0.0 for u in totals),
            "total_steps": len(steps),
        },
        "extra": {"format": TRAJECTORIES.name, "provenance": origin, **_task(session["config"])},
    }


def _agent_step(
    step: dict[str, Any],
    message: dict[str, Any],
    results: dict[Any, Any],
    outcomes: dict[str, dict[str, Any]],
    model: str | None,
) -> None:
    calls = message.get("tool_calls") or []
    step["llm_call_count"] = 1  # a recorded reply is one model call
    if model:
        step["model_name"] = model
    if not calls:
        return
    step["tool_calls"] = [
        {
            "tool_call_id": call.get("id") or f"call_{index}",
            "function_name": (call.get("function") or {}).get("name") or "",
            "arguments": _arguments((call.get("function") or {}).get("arguments")),
        }
        for index, call in enumerate(calls)
    ]
    observed = [
        {
            "source_call_id": c["tool_call_id"],
            "content": _text(results[c["tool_call_id"]].get("content")),
            **({"extra": outcomes[c["tool_call_id"]]} if c["tool_call_id"] in outcomes else {}),
        }
        for c in step["tool_calls"]
        if c["tool_call_id"] in results
    ]
    if observed:
        step["observation"] = {"results": observed}


def _metrics(usage: dict[str, Any] | None, render: Any, *, prompt_clean: bool, reply_clean: bool) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    if usage is not None:
        metrics.update(
            prompt_tokens=usage["prompt_tokens"],
            completion_tokens=usage["completion_tokens"],
            cost_usd=usage["cost_usd"],
        )
    if render is not None:
        if render.prompt_token_ids is not None and prompt_clean:
            metrics["prompt_token_ids"] = render.prompt_token_ids
        if render.completion_token_ids is not None and reply_clean:
            metrics["completion_token_ids"] = render.completion_token_ids
            if render.logprobs:
                metrics["logprobs"] = [float(p.get("logprob", 0.0)) for p in render.logprobs]
    return {k: v for k, v in metrics.items() if v is not None}


def _outcomes(store: Store, session_id: str) -> dict[str, dict[str, Any]]:
    """Each finished call's outcome by call id: ok, teachback's error kind, a command's exit status."""
    rows = store.query(
        """SELECT t.call_id, t.status, t.error_kind, t.exit_code FROM tool_calls t
           WHERE t.session_id = ? AND t.status IN ('ok', 'error') ORDER BY t.started_at""",
        (session_id,),
    )
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        outcome: dict[str, Any] = {"ok": row["status"] == "ok"}
        if row["error_kind"]:
            outcome["error_kind"] = row["error_kind"]
        if row["exit_code"] is not None:
            outcome["exit_code"] = row["exit_code"]
        out[row["call_id"]] = outcome
    return out


def _task(config: str | None) -> dict[str, Any]:
    """A graded task attempt's task and reward (`config.task`), as the trajectory's extra `task`."""
    task = (json.loads(config) if config else {}).get("task")
    return {"task": task} if isinstance(task, dict) else {}


def _usage(store: Store, session_id: str) -> dict[int, dict[str, Any]]:
    rows = store.query(
        """SELECT m.seq, c.prompt_tokens, c.completion_tokens, c.cost_usd FROM model_calls c
           JOIN events e ON e.id = c.id JOIN messages m ON m.session_id = c.session_id AND m.event_id = e.cause_id
           WHERE c.session_id = ?""",
        (session_id,),
    )
    return {r["seq"]: r for r in rows}


def _pairs(store: Store, session_id: str, redactor: Redactor | Unrooted | None) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for p in store.query(
        """SELECT id, source, tool, error_kind, feedback, completion_seq, correction_seq FROM pairs
           WHERE session_id = ? ORDER BY completion_seq, id""",
        (session_id,),
    ):
        feedback = redactor.redact(p["feedback"]) if redactor else p["feedback"]
        out.setdefault(p["completion_seq"], []).append({**p, "feedback": feedback})
    return out


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"raw": raw if isinstance(raw, str) else ""}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(c.get("text", "") for c in content if isinstance(c, dict))
    return ""
