"""Per-step agent overhead with the scripted model: what the session loop itself costs per step,
with no LLM time.

A step is one model call plus its tool call (read_file on a small file). The script is the real
scripted litellm provider, so each step also pays litellm's own request/stream overhead; the
adapter reports that time in each ModelUsage event (latency_ms), and it is subtracted, so "agent
overhead" is the session's own work: events, tool dispatch, argument
checks, the tool itself, bookkeeping. Target: <= 5 ms median.

Run: .venv/bin/python bench/step_overhead.py [--steps 300]
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
from pathlib import Path

from agent.config import Settings
from agent.model import LiteLLMModel
from agent.protocol import ModelUsage, ToolCallFinished, UserInput
from agent.runtime import open_session


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(steps: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TEACHBACK_HOME"] = str(Path(tmp) / "home")  # keep the user's state untouched
        root = Path(tmp) / "repo"
        root.mkdir()
        (root / "app.py").write_text("def greet(name):\n    return 'Hello, ' + name\n" * 20)
        subprocess.run(["git", "init", "-q"], cwd=root, check=True)
        script = Path(tmp) / "script.json"
        # Each step reads a different range: the session refuses a call identical to the previous one.
        turns = [
            {
                "content": None,
                "tool_calls": [
                    {
                        "function": {
                            "name": "read_file",
                            "arguments": json.dumps({"path": "app.py", "start_line": 1 + i % 2, "end_line": 20}),
                        }
                    }
                ],
            }
            for i in range(steps + 5)
        ]
        script.write_text(json.dumps(turns))
        model = f"scripted/{script}"
        settings = Settings(model=model, approval="full-auto", max_steps=steps, max_time=3600, repo_map_tokens=0)

        # Warm-up: the first call imports litellm and builds caches.
        await LiteLLMModel(model).complete([{"role": "user", "content": "hi"}], [])

        session = open_session(root, settings)
        step_ends: list[float] = []
        model_ms: list[float] = []

        def on_event(event):
            if isinstance(event, ModelUsage):
                model_ms.append(event.latency_ms)
            elif isinstance(event, ToolCallFinished):
                step_ends.append(time.perf_counter())

        session.subscribe(on_event)
        started = time.perf_counter()
        await session.run(UserInput(text="read it many times"))
        boundaries = [started, *step_ends]
        step_ms = [(b - a) * 1000 for a, b in zip(boundaries, boundaries[1:])]
        overhead = [s - m for s, m in zip(step_ms, model_ms)]

    print(f"steps measured:            {len(overhead)}")
    print(f"step wall time   median {statistics.median(step_ms):7.2f} ms   p95 {percentile(step_ms, 0.95):7.2f} ms")
    print(f"litellm call     median {statistics.median(model_ms):7.2f} ms   p95 {percentile(model_ms, 0.95):7.2f} ms")
    print(
        f"agent overhead   median {statistics.median(overhead):7.2f} ms   p95 {percentile(overhead, 0.95):7.2f} ms"
        "   (target <= 5 ms median)"
    )
    print(f"agent share of a step: {statistics.median(overhead) / statistics.median(step_ms):.0%}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    asyncio.run(measure(parser.parse_args().steps))


if __name__ == "__main__":
    main()
