"""Recorder throughput (events/s) beside raw sqlite3 writing the same rows, measured in one run.

    .venv/bin/python bench/recorder_bench.py [--sessions 60] [--repeat 5] [--json] [--profile live|many]

The recorder's writes are captured once (every INSERT, UPDATE and DELETE it sends, with its
parameters, per event); then each way writes the same rows to a fresh WAL database of the same
schema (its triggers included), repeated, medians printed:
- recorder: `Recorder(store)(event)` per event, one IMMEDIATE transaction each (the live path:
  an event is durable when the call returns), with messages, tool calls, edits and pairs;
- raw one-row commits: the captured writes of each event in one IMMEDIATE transaction of its own,
  straight through sqlite3 (what the live path costs without the recorder's own work);
- record_many: the same recorder code, one transaction for the whole log (imports and replays);
- raw executemany: the captured writes in one transaction, runs of one statement as `executemany`.

`--profile` runs one way under cProfile instead and prints where its time goes, by function.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sqlite3
import statistics
import sys
import tempfile
import time
from itertools import groupby
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
from feedback_store.recording import recorder as recorder_module  # noqa: E402

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


Write = tuple[str, tuple]  # a statement and its parameters


class Capture:
    """A connection that passes everything on and keeps the writes it was sent."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn, self.writes = conn, []

    def execute(self, sql: str, params: tuple | dict = ()) -> sqlite3.Cursor:
        if sql.lstrip().split(None, 1)[0].upper() in ("INSERT", "UPDATE", "DELETE", "REPLACE"):
            self.writes.append((sql, params))
        return self.conn.execute(sql, params)


def captured_writes(events: list[Event], tmp: Path) -> list[list[Write]]:
    """The recorder's writes for each event, recorded on a fresh database."""
    store = open_store(fresh(tmp, "capture"))
    out = []
    for event in events:
        with store.write() as conn:
            capture = Capture(conn)
            recorder_module._record_each(capture, [event])
        out.append(capture.writes)
    store.close()
    return out


def raw_connection(tmp: Path, name: str) -> sqlite3.Connection:
    conn = sqlite3.connect(fresh(tmp, name), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")  # as the store opens its databases
    return conn


def run_raw_one_row(writes: list[list[Write]], tmp: Path) -> float:
    conn = raw_connection(tmp, "raw-one")
    start = time.perf_counter()
    for event_writes in writes:
        conn.execute("BEGIN IMMEDIATE")
        for sql, params in event_writes:
            conn.execute(sql, params)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def run_raw_executemany(writes: list[list[Write]], tmp: Path) -> float:
    conn = raw_connection(tmp, "raw-many")
    start = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    for sql, group in groupby((w for event_writes in writes for w in event_writes), key=lambda w: w[0]):
        params = [p for _, p in group]
        if "RETURNING" in sql:  # executemany takes no statement that returns rows
            for one in params:
                conn.execute(sql, one).fetchall()
        else:
            conn.executemany(sql, params)
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def profile(events: list[Event], way: str, top: int = 30) -> None:
    """Where the recorder's time goes (`way`: live, one transaction per event, or many, one for all)."""
    with tempfile.TemporaryDirectory() as folder:
        run_record_many(session_events(0), Path(folder))  # what is done once per process, done before
        store = open_store(fresh(Path(folder), "profile"))
        recorder = Recorder(store)
        profiler = cProfile.Profile()
        profiler.enable()
        if way == "live":
            for event in events:
                recorder(event)
        else:
            recorder.record_many(events)
        profiler.disable()
        store.close()
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="end with one JSON object of the figures")
    parser.add_argument("--profile", choices=("live", "many"), help="profile one way instead of timing them all")
    args = parser.parse_args()
    events = [e for n in range(args.sessions) for e in session_events(n)]
    if args.profile:
        profile(events, args.profile)
        return
    size = sum(len(e.to_json()) for e in events) / len(events)
    rates: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        writes = captured_writes(events, tmp)
        print(
            f"{len(events)} events ({args.sessions} sessions, mean {size:.0f} bytes of JSON each, "
            f"{sum(map(len, writes)) / len(events):.1f} rows written each), {args.repeat} runs, interleaved"
        )
        runners = {
            "recorder (per event)": lambda: run_recorder(events, tmp),
            "raw one-row commits": lambda: run_raw_one_row(writes, tmp),
            "recorder.record_many": lambda: run_record_many(events, tmp),
            "raw executemany": lambda: run_raw_executemany(writes, tmp),
        }
        times: dict[str, list[float]] = {name: [] for name in runners}
        for _ in range(args.repeat):  # interleaved, so a slow spell of the machine hits every way
            for name, runner in runners.items():
                times[name].append(runner())
        rates = {name: len(events) / statistics.median(t) for name, t in times.items()}
    for name, rate in rates.items():
        print(f"  {name:<22} {rate:>10,.0f} events/s")
    live = rates["recorder (per event)"] / rates["raw one-row commits"]
    batched = rates["recorder.record_many"] / rates["raw executemany"]
    print(f"  live path: {live:.1%} of raw one-row commits; batched: {batched:.1%} of raw executemany")
    if args.json:
        figures = {
            "events": len(events),
            "live_events_per_s": rates["recorder (per event)"],
            "raw_one_row_events_per_s": rates["raw one-row commits"],
            "batched_events_per_s": rates["recorder.record_many"],
            "raw_executemany_events_per_s": rates["raw executemany"],
            "live_vs_raw_one_row": live,
            "batched_vs_raw_executemany": batched,
        }
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
