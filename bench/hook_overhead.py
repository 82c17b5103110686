"""The time one no-op command hook adds to each tool call, beside the same calls with no hook.

    .venv/bin/python bench/hook_overhead.py [--calls 200] [--rounds 5] [--command true] [--json]

Sessions with the scripted model read a small file (read_file) --calls times in all. In rounds that
run a session with no hook and then one with a PreToolUse hook matching every tool (`--command`,
by default `true`: the hook's own work is nothing, so what is measured is teachback's: starting the
process in its own group, the event as JSON on its stdin, reading its answer), each call's time from
ToolCallStarted to ToolCallFinished (its `duration_ms`) is collected; a change in the machine's load
falls on both alike. Each round also starts the same command bare, with asyncio, as many times (its
stdin a JSON event of the same size): the floor any command hook pays. Printed: median and p99 per
call of each, the added time (with minus without, median and p99), the ratio of the medians, and the
added time beside the bare start; with --json, one object of the figures as the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
from asyncio.subprocess import PIPE
from pathlib import Path

from agent.config import Settings
from agent.model import LiteLLMModel
from agent.protocol import HookRan, ToolCallFinished, UserInput
from agent.runtime import open_session


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def script_of(calls: int, folder: Path) -> str:
    # Each call reads another range: the session refuses a call identical to the one before it.
    turns = [
        {
            "content": None,
            "tool_calls": [
                {
                    "function": {
                        "name": "read_file",
                        "arguments": json.dumps({"path": "app.py", "start_line": 1 + i % 2}),
                    }
                }
            ],
        }
        for i in range(calls)
    ]
    path = folder / "script.json"
    path.write_text(json.dumps(turns))
    return f"scripted/{path}"


async def one_session(root: Path, home: Path, model: str, calls: int) -> tuple[list[float], list[float]]:
    """Per-call times (ms) of one session with TEACHBACK_HOME at `home`, and each hook's own time
    (from its start to its exit, as its HookRan event says)."""
    os.environ["TEACHBACK_HOME"] = str(home)  # its teachback.toml holds the hook, or nothing
    settings = Settings(model=model, approval="full-auto", max_steps=calls, max_time=3600, repo_map_tokens=0)
    session = open_session(root, settings)
    times: list[float] = []
    hooks: list[float] = []
    session.subscribe(lambda e: times.append(e.duration_ms) if isinstance(e, ToolCallFinished) else None)
    session.subscribe(lambda e: hooks.append(e.duration_ms) if isinstance(e, HookRan) else None)
    await session.run(UserInput(text="read it many times"))
    await session.close()
    return times, hooks


async def bare_starts(command: str, root: Path, count: int) -> list[float]:
    """Milliseconds to start `command` with a small JSON event on its stdin and wait for it."""
    event = json.dumps({"hook_event_name": "PreToolUse", "tool_name": "read_file", "tool_input": {"path": "app.py"}})
    times = []
    for _ in range(count):
        clock = time.perf_counter()
        process = await asyncio.create_subprocess_shell(
            command, cwd=root, stdin=PIPE, stdout=PIPE, stderr=PIPE, start_new_session=True
        )
        await process.communicate(event.encode())
        times.append((time.perf_counter() - clock) * 1000)
    return times


async def measure(calls: int, rounds: int, command: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        root, plain, hooked = folder / "repo", folder / "plain", folder / "hooked"
        for path in (root, plain, hooked):
            path.mkdir()
        (root / "app.py").write_text("def greet(name):\n    return 'Hello, ' + name\n" * 20)
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        (hooked / "teachback.toml").write_text(
            f'[[hooks.PreToolUse]]\nmatcher = "*"\n[[hooks.PreToolUse.hooks]]\ntype = "command"\n'
            f"command = {json.dumps(command)}\ntimeout = 30\n"
        )
        per_round = max(2, calls // rounds)
        model = script_of(per_round, folder)
        await LiteLLMModel(model).complete([{"role": "user", "content": "hi"}], [])  # import litellm first
        without: list[float] = []
        with_hook: list[float] = []
        bare: list[float] = []
        ran: list[float] = []
        for _ in range(rounds):
            times, _ = await one_session(root, plain, model, per_round)
            without += times
            times, hooks = await one_session(root, hooked, model, per_round)
            with_hook += times
            ran += hooks
            bare += await bare_starts(command, root, per_round)
    if len(ran) != len(with_hook):
        raise SystemExit(
            f"the hook ran {len(ran)} times for {len(with_hook)} calls; the measurement is not what it says"
        )
    median_without, median_with = statistics.median(without), statistics.median(with_hook)
    return {
        "calls": len(with_hook),
        "rounds": rounds,
        "command": command,
        "without_median_ms": median_without,
        "without_p99_ms": percentile(without, 0.99),
        "with_median_ms": median_with,
        "with_p99_ms": percentile(with_hook, 0.99),
        "added_median_ms": median_with - median_without,
        "added_p99_ms": percentile(with_hook, 0.99) - percentile(without, 0.99),
        "ratio": median_with / median_without,
        "hook_process_median_ms": statistics.median(ran),
        "bare_start_median_ms": statistics.median(bare),
        "bare_start_p99_ms": percentile(bare, 0.99),
        "added_vs_bare_start": (median_with - median_without) / statistics.median(bare),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200, help="tool calls with the hook (and as many without)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--command", default="true", help="the no-op hook command (default: true)")
    parser.add_argument("--json", action="store_true", help="end with one JSON object of the figures")
    args = parser.parse_args()
    figures = asyncio.run(measure(args.calls, args.rounds, args.command))
    print(f"tool calls: {figures['calls']} with a no-op hook (`{args.command}`), as many without, {args.rounds} rounds")
    print(f"  no hook       median {figures['without_median_ms']:7.2f} ms   p99 {figures['without_p99_ms']:7.2f} ms")
    print(f"  one hook      median {figures['with_median_ms']:7.2f} ms   p99 {figures['with_p99_ms']:7.2f} ms")
    print(f"  added         median {figures['added_median_ms']:7.2f} ms   p99 {figures['added_p99_ms']:7.2f} ms")
    print(f"  ratio         {figures['ratio']:.1f}x the time of a call with no hook (medians)")
    print(f"  the hook's own process, start to exit, median {figures['hook_process_median_ms']:7.2f} ms")
    print(
        f"  bare start    median {figures['bare_start_median_ms']:7.2f} ms   p99 {figures['bare_start_p99_ms']:7.2f} ms"
        f"   (the added time is {figures['added_vs_bare_start']:.2f}x starting the command bare)"
    )
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
