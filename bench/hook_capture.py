"""What teachback's capture hook costs the agent that runs it: the wall time of one hook call, as
Claude Code runs it (the command `teachback hooks install` wrote, through the shell, a payload on
stdin), beside `python -c pass` with the same interpreter, interleaved call by call in the same run.

The calls cycle through a prompt, a PreToolUse and a PostToolUse payload of Claude Code's documented
shape, written to a real feedback database. Stop is left out: it also starts the turn's recording in
the background, which is not the hook's own time but would load the two measured processes' CPU.

    python bench/hook_capture.py [--calls 200] [--json]

The budget: the hook's p99 at most 50 ms above the interpreter's. `--guard` installs it guarding, so
each PreToolUse also looks its call up among the lessons (the file it reads does not exist, so the
lookup runs to the end).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUDGET_MS = 50.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=200, help="hook calls (and as many baseline calls)")
    parser.add_argument("--json", action="store_true", help="one JSON object on the last line")
    parser.add_argument("--guard", action="store_true", help="install it guarding: each PreToolUse looks up lessons")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hook-bench-") as scratch:
        result = measure(Path(scratch), args.calls, guard=args.guard)
    if args.json:
        print(json.dumps(result))
    else:
        for name in ("python_pass", "hook"):
            row = result[name]
            print(f"{name:12} p50 {row['p50_ms']:7.1f} ms   p99 {row['p99_ms']:7.1f} ms   ({row['calls']} calls)")
        print(
            f"hook over the interpreter: p50 {result['over_p50_ms']:.1f} ms, p99 {result['over_p99_ms']:.1f} ms "
            f"(budget {BUDGET_MS:.0f} ms at p99: {'within' if result['within_budget'] else 'OVER'})"
        )
    return 0


def measure(scratch: Path, calls: int, *, guard: bool = False) -> dict:
    project, home = scratch / "project", scratch / "home"
    project.mkdir()
    env = {**os.environ, "TEACHBACK_HOME": str(home)}
    env.pop("TEACHBACK_DB", None)
    teachback = Path(sys.executable).with_name("teachback")
    words = [str(teachback)] if teachback.is_file() else [sys.executable, "-P", "-m", "cli"]
    install = [*words, "hooks", "install", "claude-code", "--project", *(["--guard"] if guard else [])]
    subprocess.run(install, cwd=project, env=env, check=True)
    subprocess.run([*words, "stats"], cwd=project, env=env, check=True, capture_output=True)  # the database exists
    settings = json.loads((project / ".claude/settings.json").read_text(encoding="utf-8"))
    command = settings["hooks"]["PreToolUse"][-1]["hooks"][0]["command"]
    baseline = f"{shlex.quote(sys.executable)} -c pass"
    payloads = _payloads(project)
    hook_ms, base_ms = [], []
    for index in range(calls):
        base_ms.append(_time(baseline, b"", project, env))
        hook_ms.append(_time(command, payloads[index % len(payloads)], project, env))
    result = {"benchmark": "hook_capture", "calls": calls, "guard": guard, "command": command}
    result["python_pass"] = _summary(base_ms)
    result["hook"] = _summary(hook_ms)
    result["over_p50_ms"] = round(result["hook"]["p50_ms"] - result["python_pass"]["p50_ms"], 2)
    result["over_p99_ms"] = round(result["hook"]["p99_ms"] - result["python_pass"]["p99_ms"], 2)
    result["within_budget"] = result["over_p99_ms"] <= BUDGET_MS
    # What the calls wrote, recorded as a session: the hook did its work, not only return quickly.
    drain = [*words, "capture", "--drain"]
    result["recorded"] = subprocess.run(
        drain, cwd=project, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    return result


def _payloads(project: Path) -> list[bytes]:
    common = {
        "session_id": "bench-session",
        "transcript_path": str(project / "transcript.jsonl"),
        "cwd": str(project),
        "permission_mode": "default",
    }
    read = {"file_path": str(project / "app.py")}
    events = [
        {"hook_event_name": "UserPromptSubmit", "prompt": "Read app.py and explain it"},
        {"hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": read, "tool_use_id": "toolu_bench"},
        {
            "hook_event_name": "PostToolUse",
            "tool_name": "Read",
            "tool_input": read,
            "tool_response": {"type": "text", "file": {"filePath": read["file_path"], "content": "x = 1\n" * 200}},
            "tool_use_id": "toolu_bench",
        },
    ]
    return [json.dumps({**common, **event}).encode() for event in events]


def _time(command: str, payload: bytes, cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, shell=True, input=payload, cwd=cwd, env=env, capture_output=True)
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0 or done.stdout:
        raise SystemExit(f"the hook answered {done.returncode} {done.stdout!r} {done.stderr!r}")
    return elapsed


def _summary(ms: list[float]) -> dict:
    ordered = sorted(ms)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"calls": len(ms), "p50_ms": round(statistics.median(ordered), 2), "p99_ms": round(p99, 2)}


if __name__ == "__main__":
    sys.exit(main())
