"""Recorder throughput (events/s) beside a raw batched sqlite3 insert of the same event rows.

    .venv/bin/python bench/recorder_bench.py [--sessions 60] [--repeat 5]

Three ways to write the same events to a fresh WAL database, each repeated; medians printed:
- recorder: `Recorder(store)(event)` per event, one IMMEDIATE transaction each (the live path:
  an event is durable when the call returns), with messages, tool calls, edits and pairs;
- record_many: the same recorder code, one transaction for the whole log (imports and replays);
- raw: `executemany` of (id, session_id, type, ts, cause_id, json) rows in one transaction.
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
    EditApplied,
    Event,
    ModelUsage,
    SessionStarted,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
    new_id,
)
from feedback_store import Recorder, open_store  # noqa: E402

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": n,
            "description": f"The {n} tool. " * 8,
            "parameters": {"type": "object", "properties": {}},
        },
    }
    for n in ("read_file", "edit_file", "run_command", "finish")
]
CODE = "def handler(request):\n    return render(request, 'index.html', {'items': items})\n" * 6


def session_events(n: int) -> list[Event]:
    """A realistic session: ~1 KB messages, tool calls that fail and are fixed, edits, usage."""
    sid = new_id()
    events: list[Event] = [
        SessionStarted(
            session_id=sid,
            workspace="/w",
            model="openai/gpt",
            frontend="bench",
            system_prompt="You are a coding agent. " * 40,
            tools=TOOLS,
        ),
        TurnStarted(session_id=sid, turn=1, text=f"task {n}", message={"role": "user", "content": f"task {n}"}),
    ]
    for step in range(1, 11):
        call_id = f"c{step}"
        ok = step % 2 == 0
        args = json.dumps({"path": "app.py", "old_text": CODE[:200], "new_text": CODE[:210]})
        events += [
            AssistantMessage(
                session_id=sid,
                step=step,
                message={
                    "role": "assistant",
                    "content": "Editing.",
                    "tool_calls": [
                        {"id": call_id, "type": "function", "function": {"name": "edit_file", "arguments": args}}
                    ],
                },
            ),
            ModelUsage(
                session_id=sid,
                model="openai/gpt",
                step=step,
                prompt_tokens=900,
                completion_tokens=80,
                cost_usd=0.002,
                latency_ms=800.0,
            ),
            ToolCallStarted(session_id=sid, call_id=call_id, name="edit_file", arguments=args, step=step),
        ]
        if ok:
            events.append(
                EditApplied(
                    session_id=sid,
                    edit_id=new_id(),
                    call_id=call_id,
                    path="app.py",
                    kind="modify",
                    before=CODE + str(step - 1),
                    after=CODE + str(step),
                    diff=f"-{step - 1}\n+{step}\n",
                )
            )
        result = "Edited app.py." if ok else "old_text was not found in app.py. Closest lines:\n" + CODE[:300]
        events.append(
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
            )
        )
    events.append(TurnFinished(session_id=sid, turn=1, reason="finished", steps=10))
    return events


def fresh(tmp: Path, name: str) -> Path:
    path = tmp / f"{name}-{new_id()}.db"
    open_store(path).close()
    return path


def run_recorder(events: list[Event], tmp: Path) -> float:
    store = open_store(fresh(tmp, "rec"))
    recorder = Recorder(store)
    start = time.perf_counter()
    for event in events:
        recorder(event)
    elapsed = time.perf_counter() - start
    store.close()
    return elapsed


def run_record_many(events: list[Event], tmp: Path) -> float:
    store = open_store(fresh(tmp, "many"))
    start = time.perf_counter()
    Recorder(store).record_many(events)
    elapsed = time.perf_counter() - start
    store.close()
    return elapsed


def run_raw(events: list[Event], tmp: Path) -> float:
    conn = sqlite3.connect(fresh(tmp, "raw"), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    start = time.perf_counter()
    rows = [(e.id, e.session_id, e.type, e.ts, e.cause_id, e.to_json()) for e in events]
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO events (id, session_id, type, ts, cause_id, json) VALUES (?, ?, ?, ?, ?, ?)", rows)
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    events = [e for n in range(args.sessions) for e in session_events(n)]
    size = sum(len(e.to_json()) for e in events) / len(events)
    print(f"{len(events)} events ({args.sessions} sessions, mean {size:.0f} bytes of JSON each), {args.repeat} runs")
    runners = {
        "recorder (per event)": run_recorder,
        "recorder.record_many": run_record_many,
        "raw executemany": run_raw,
    }
    rates: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, runner in runners.items():
            times = [runner(events, Path(folder)) for _ in range(args.repeat)]
            rates[name] = len(events) / statistics.median(times)
    raw = rates["raw executemany"]
    for name, rate in rates.items():
        print(f"  {name:<22} {rate:>10,.0f} events/s   {rate / raw:6.1%} of raw")


if __name__ == "__main__":
    main()
