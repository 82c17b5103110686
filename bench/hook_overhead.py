"""The time one no-op command hook adds to each tool call, beside the same calls with no hook.

    .venv/bin/python bench/hook_overhead.py [--calls 200] [--rounds 5] [--command true] [--json]

Sessions with the scripted model read a small file (read_file) --calls times in all. In rounds that
run a session with no hook and then one with a PreToolUse hook matching every tool (`--command`,
by default `true`: the hook's own work is nothing, so what is measured is teachback's: starting the
process in its own group, the event as JSON on its stdin, reading its answer), each call's time from
ToolCallStarted to ToolCallFinished (its `duration_ms`) is collected; a change in the machine's load
falls on both alike. Printed: median and p99 per call of each, the added time (with minus without,
median and p99) and the ratio of the medians; with --json, one object of the figures as the last line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
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


async def one_session(root: Path, home: Path, model: str, calls: int) -> tuple[list[float], int]:
    """Per-call times (ms) of one session with TEACHBACK_HOME at `home`, and how many hooks ran."""
    os.environ["TEACHBACK_HOME"] = str(home)  # its teachback.toml holds the hook, or nothing
    settings = Settings(model=model, approval="full-auto", max_steps=calls, max_time=3600, repo_map_tokens=0)
    session = open_session(root, settings)
    times: list[float] = []
    hooks = []
    session.subscribe(lambda e: times.append(e.duration_ms) if isinstance(e, ToolCallFinished) else None)
    session.subscribe(lambda e: hooks.append(e) if isinstance(e, HookRan) else None)
    await session.run(UserInput(text="read it many times"))
    await session.close()
    return times, len(hooks)


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
        ran = 0
        for _ in range(rounds):
            times, _ = await one_session(root, plain, model, per_round)
            without += times
            times, count = await one_session(root, hooked, model, per_round)
            with_hook += times
            ran += count
    if ran != len(with_hook):
        raise SystemExit(f"the hook ran {ran} times for {len(with_hook)} calls; the measurement is not what it says")
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
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
