"""Export throughput (pairs/s) over >= 100k pairs beside a raw SELECT + json.dumps baseline.

    .venv/bin/python bench/export_bench.py [--pairs 100000] [--repeat 3] [--json]

One recorded session (five failed edits, each fixed) is cloned by SQL into enough sessions to
hold --pairs pairs, each clone with its own instruction so no two pairs share content (the clones'
other messages are the same texts, which the redacted export redacts once, as it does a real store's
shared system prompt and tool schemas). Then, each repeated, the ways interleaved so that a slow
spell of the machine hits each, and the medians printed:
- raw: one SELECT of the pairs, one SELECT of each session's messages, json.dumps of a record with
  the same prompt / completion / feedback / correction / teacher_prompt content, written as JSON Lines;
- export sdpo (redaction off, and on): `feedback_store.export.export.export`.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.protocol import (  # noqa: E402
    AssistantMessage,
    Event,
    SessionStarted,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
    new_id,
)
from feedback_store import Recorder, open_store  # noqa: E402
from feedback_store.export.export import export  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "edit_file",
            "description": "Replace text in a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def template(sid: str) -> list[Event]:
    events: list[Event] = [
        SessionStarted(
            session_id=sid,
            workspace="/w",
            model="openai/gpt",
            frontend="bench",
            system_prompt="You are a careful coding agent working in /w.",
            tools=TOOLS,
        ),
        TurnStarted(session_id=sid, turn=1, text="task", message={"role": "user", "content": "task"}),
    ]
    for step in range(1, 11):
        call_id = f"c{step}"
        ok = step % 2 == 0
        args = json.dumps({"path": "app.py", "old_text": f"value = {step}", "new_text": f"value = {step + 1}"})
        result = "Edited app.py." if ok else f"old_text was not found in app.py; the closest line is 'value = {step}0'."
        events += [
            AssistantMessage(
                session_id=sid,
                step=step,
                message={
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": call_id, "type": "function", "function": {"name": "edit_file", "arguments": args}}
                    ],
                },
            ),
            ToolCallStarted(session_id=sid, call_id=call_id, name="edit_file", arguments=args, step=step),
            ToolCallFinished(
                session_id=sid,
                call_id=call_id,
                name="edit_file",
                ok=ok,
                result=result,
                step=step,
                error_kind=None if ok else "no_match",
                target="app.py",
                message={"role": "tool", "tool_call_id": call_id, "content": result},
            ),
        ]
    return [*events, TurnFinished(session_id=sid, turn=1, reason="finished", steps=10)]


def build(db: Path, pairs: int) -> int:
    sid = new_id()
    store = open_store(db)
    Recorder(store).record_many(template(sid))
    per_session = store.count_pairs()
    clones = -(-pairs // per_session)
    with store.write() as conn:
        conn.execute(
            f"CREATE TEMP TABLE nums AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
            f"WHERE i < {clones - 1}) SELECT printf('%07d', i) AS k, i FROM n"
        )
        conn.execute("""INSERT INTO sessions (id, workspace, model, frontend, git_head, config, system_prompt_hash,
            tools_hash, protocol_version, started_at, title, repository)
            SELECT s.id || '-' || k, workspace, model, frontend, git_head, config, system_prompt_hash, tools_hash,
            protocol_version, started_at + i, title, repository FROM sessions s, nums""")
        conn.execute(
            """INSERT INTO messages SELECT m.session_id || '-' || k, seq, event_id || '-' || k, role,
            CASE WHEN role = 'user' THEN json_set(message, '$.content', 'task ' || k) ELSE message END
            FROM messages m, nums WHERE m.session_id = ?""",
            (sid,),
        )
        conn.execute("""INSERT INTO pairs SELECT p.id || '-' || k, p.session_id || '-' || k, source, tool, error_kind,
            target, feedback, tools_hash, anchor_seq, completion_seq, correction_seq, correction, closes_on,
            failure_event_id, correction_event_id, created_at + i, corrected_at + i, correction_call_id
            FROM pairs p, nums""")
    total = store.count_pairs()
    store.close()
    return total


def raw(db: Path, out: Path) -> None:
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT id, session_id, source, feedback, completion_seq, correction_seq FROM pairs "
        "ORDER BY session_id, completion_seq"
    ).fetchall()
    current, messages = None, []
    with out.open("w", encoding="utf-8") as handle:
        for pair_id, sid, source, feedback, seq, fix in rows:
            if sid != current:
                current = sid
                messages = [
                    json.loads(m)
                    for (m,) in conn.execute("SELECT message FROM messages WHERE session_id = ? ORDER BY seq", (sid,))
                ]
            prompt = messages[:seq]
            record = {
                "id": pair_id,
                "session_id": sid,
                "source": source,
                "prompt": prompt,
                "completion": messages[seq],
                "feedback": feedback,
                "correction": messages[fix] if fix is not None else None,
                "teacher_prompt": [*prompt, {"role": "user", "content": feedback}],
            }
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="end with one JSON object of the figures")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db, out = Path(folder) / "bench.db", Path(folder) / "out.jsonl"
        started = time.perf_counter()
        total = build(db, args.pairs)
        print(
            f"{total:,} pairs in {db.stat().st_size / 1e6:.0f} MB (built in {time.perf_counter() - started:.1f} s), "
            f"{args.repeat} runs each"
        )
        runners = {
            "raw SELECT + json.dumps": lambda: raw(db, out),
            "export sdpo, no redaction": lambda: export([db], "sdpo", out, redact=False),
            "export sdpo, redacted": lambda: export([db], "sdpo", out),
        }
        times: dict[str, list[float]] = {name: [] for name in runners}
        sizes: dict[str, float] = {}
        for _ in range(args.repeat):  # interleaved, so a slow spell of the machine hits every way
            for name, run in runners.items():
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
                sizes[name] = out.stat().st_size / 1e6
        rates = {name: total / statistics.median(t) for name, t in times.items()}
        for name, rate in rates.items():
            print(f"  {name:<26} {rate:>9,.0f} pairs/s  ({sizes[name]:,.0f} MB written)")
        base = rates["raw SELECT + json.dumps"]
        for name, rate in rates.items():
            print(f"  {name:<26} {rate / base:6.1%} of raw")
        if args.json:
            figures = {
                "pairs": total,
                "raw_pairs_per_s": round(base),
                "pairs_per_s": round(rates["export sdpo, no redaction"]),
                "redacted_pairs_per_s": round(rates["export sdpo, redacted"]),
                "vs_raw": round(rates["export sdpo, no redaction"] / base, 4),
                "vs_raw_redacted": round(rates["export sdpo, redacted"] / base, 4),
            }
            print(json.dumps(figures))


if __name__ == "__main__":
    main()
