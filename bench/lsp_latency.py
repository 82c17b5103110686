"""Language-server latency while the agent works: what an editor waits for, measured over stdio.

A plain JSON-RPC client starts the real server (`python -m lsp_server`), then times three requests
in a loop, in four phases of one run:

- start-up: the first seconds after `initialized` (the server is warming up the agent's imports);
- idle: the same server once it has settled (no CPU used for a second);
- turn: while a scripted turn of --steps steps streams (reads, searches, listings, edits and creates);
- embedded: while the embedded model (`local/smollm2`) generates a turn (a second server; the turn
  is cancelled after --embedded-seconds, so the phase is all prompt processing and generation).

The requests: `hover` (not implemented by the server, so it answers MethodNotFound: a pure round
trip through the server's loop), `codeAction` (implemented), and `didChange`, a notification, timed
as didChange immediately followed by a hover, from writing the didChange to the hover's answer (the
server handles messages in order, so that answer means the change was processed). Time to
`initialize` is from spawning the process to the answer, plus the server's own figure.

Each phase runs once per turn process (`turn_process = "inline" | "worker"`, through
TEACHBACK_TURN_PROCESS), so the printed ratios compare the two in the same run.

Run: .venv/bin/python bench/lsp_latency.py [--steps 400] [--seconds 12] [--embedded-seconds 30]
     [--modes inline,worker]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
KINDS = ("hover", "codeAction", "didChange")
APP = "def greet(name):\n    return 'Hello, ' + name\n"
CAPABILITIES = {
    "window": {"workDoneProgress": True},
    "workspace": {
        "applyEdit": True,
        "workspaceEdit": {"documentChanges": True, "resourceOperations": ["create", "rename", "delete"]},
    },
}


class Client:
    """The server's stdio, framed JSON-RPC; answers the server's own requests as an editor would."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.spawned = time.perf_counter()
        self.pending: dict[int, asyncio.Future[tuple[float, dict[str, Any]]]] = {}
        self.next_id = 1
        self.version = 1
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, mode: str, home: Path) -> Client:
        env = {**os.environ, "TEACHBACK_HOME": str(home), "TEACHBACK_TURN_PROCESS": mode}
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "lsp_server",
            cwd=str(REPO),
            env=env,
            limit=2**26,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        return cls(process)

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def request(
        self, method: str, params: Any, timeout: float = 600, since: float | None = None
    ) -> tuple[float, dict[str, Any]]:
        """(seconds from sending, or from `since`, to the answer; the answer)."""
        msg_id, self.next_id = self.next_id, self.next_id + 1
        future = self.pending[msg_id] = asyncio.get_running_loop().create_future()
        sent = time.perf_counter()
        self.send({"id": msg_id, "method": method, "params": params})
        answered, answer = await asyncio.wait_for(future, timeout)
        return answered - (sent if since is None else since), answer

    def change(self, uri: str) -> None:
        self.version += 1
        text = APP + f"# edit {self.version}\n"
        self.send(
            {
                "method": "textDocument/didChange",
                "params": {"textDocument": {"uri": uri, "version": self.version}, "contentChanges": [{"text": text}]},
            }
        )

    async def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            length = 0
            while (line := await stdout.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if not length:
                return
            self._received(json.loads(await stdout.readexactly(length)), time.perf_counter())

    def _received(self, message: dict[str, Any], now: float) -> None:
        """A message from the server: a request of its own is answered, a reply resolves its request."""
        if "method" in message and "id" in message:
            self.send({"id": message["id"], "result": _answer(message["method"])})
        elif "id" in message and message["id"] in self.pending:
            self.pending.pop(message["id"]).set_result((now, message))

    async def stop(self) -> float | None:
        """Shut down and exit; the seconds that took, or None when the server had to be killed."""
        started = time.perf_counter()
        try:
            await self.request("shutdown", None, timeout=30)
            self.send({"method": "exit"})
            await asyncio.wait_for(self.process.wait(), 30)
            return time.perf_counter() - started
        except TimeoutError:
            return None
        finally:
            if self.process.returncode is None:
                self.process.kill()
                await self.process.wait()
            self.reader.cancel()


def _answer(method: str) -> Any:
    if method == "workspace/applyEdit":
        return {"applied": True}
    return None  # progress tokens, approval questions (none in auto-edit), registrations


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def sample(client: Client, uri: str, done: Any, into: dict[str, list[float]], gap: float = 0.01) -> None:
    """Time each request kind in turn until `done()`."""
    position = {"textDocument": {"uri": uri}, "position": {"line": 1, "character": 11}}
    action = {
        "textDocument": {"uri": uri},
        "context": {"diagnostics": []},
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}},
    }
    while not done():
        took, _ = await client.request("textDocument/hover", position)
        into["hover"].append(took)
        took, answer = await client.request("textDocument/codeAction", action)
        assert "result" in answer, answer
        into["codeAction"].append(took)
        changed = time.perf_counter()
        client.change(uri)
        took, _ = await client.request("textDocument/hover", position, since=changed)
        into["didChange"].append(took)
        await asyncio.sleep(gap)


def script(steps: int) -> list[dict[str, Any]]:
    """A turn that reads, lists, searches, edits and creates; no two consecutive calls alike."""

    def step(i: int) -> dict[str, Any]:
        if i % 25 == 24:
            name, args = "create_file", {"path": f"gen/m{i}.py", "content": f"VALUE = {i}\n" * 5}
        elif i % 10 == 9:
            old = "a - b" if (i // 10) % 2 == 0 else "b - a"
            name, args = (
                "edit_file",
                {
                    "path": "util.py",
                    "old_text": f"return {old}",
                    "new_text": f"return {'b - a' if old == 'a - b' else 'a - b'}",
                },
            )
        elif i % 5 == 4:
            name, args = "search", {"pattern": "def \\w+"}
        elif i % 7 == 6:
            name, args = "list_files", {}
        else:
            name, args = "read_file", {"path": ("app.py", "util.py")[i % 2], "start_line": 1 + i % 2}
        return {
            "content": f"Step {i}: looking at the code before changing it.",
            "tool_calls": [{"id": f"c{i}", "function": {"name": name, "arguments": json.dumps(args)}}],
        }

    return [step(i) for i in range(steps)]


def make_repo(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "app.py").write_text(APP)
    (root / "util.py").write_text("def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n")
    for args in (
        ["init", "-q", "-b", "main"],
        ["add", "-A"],
        ["-c", "user.email=b@example.com", "-c", "user.name=bench", "commit", "-q", "-m", "initial"],
    ):
        subprocess.run(["git", *args], cwd=root, check=True)


async def settle(client: Client, limit: float = 90.0) -> float:
    """Wait until the server and its children use no CPU for a second; the seconds waited."""
    started = time.monotonic()
    previous = _cpu_seconds(client.process.pid)
    while time.monotonic() - started < limit:
        await asyncio.sleep(1.0)
        now = _cpu_seconds(client.process.pid)
        if now is None or previous is not None and now - previous < 0.02:
            break
        previous = now
    return time.monotonic() - started


def _cpu_seconds(pid: int) -> float | None:
    """User+system CPU seconds of `pid` and its live children (Linux /proc; None elsewhere)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        total = 0.0
        for one in [str(pid), *children]:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total
    except (OSError, ValueError, IndexError):
        return None


async def initialize(client: Client, root: Path, options: dict[str, Any]) -> dict[str, float]:
    took, answer = await client.request(
        "initialize",
        {
            "processId": os.getpid(),
            "rootUri": root.as_uri(),
            "capabilities": CAPABILITIES,
            "initializationOptions": options,
        },
        since=client.spawned,
    )
    assert "result" in answer, answer
    client.send({"method": "initialized", "params": {}})
    return {"from_spawn": took}


def open_app(client: Client, root: Path) -> str:
    uri = (root / "app.py").as_uri()
    client.send(
        {
            "method": "textDocument/didOpen",
            "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": APP}},
        }
    )
    return uri


async def status(client: Client) -> dict[str, Any]:
    _, answer = await client.request("workspace/executeCommand", {"command": "teachback.status", "arguments": []})
    return answer["result"]


async def ask_while_sampling(
    client: Client, uri: str, into: dict[str, list[float]], instruction: str, limit: float
) -> dict[str, Any]:
    asking = asyncio.ensure_future(
        client.request(
            "workspace/executeCommand",
            {"command": "teachback.ask", "arguments": [{"instruction": instruction}]},
            timeout=limit + 120,
        )
    )
    deadline = time.monotonic() + limit
    await sample(client, uri, lambda: asking.done() or time.monotonic() > deadline, into)
    if not asking.done():
        await client.request("workspace/executeCommand", {"command": "teachback.cancel", "arguments": []})
    took, answer = await asking
    result = answer.get("result") or {"error": answer.get("error")}
    return {"seconds": took, "reason": result.get("reason", result.get("error")), "steps": result.get("steps")}


def phases() -> dict[str, dict[str, list[float]]]:
    return {p: {k: [] for k in KINDS} for p in ("start-up", "idle", "turn", "embedded")}


async def run_mode(mode: str, tmp: Path, steps: int, seconds: float, embedded: float) -> dict[str, Any]:
    found = phases()
    report: dict[str, Any] = {"samples": found}
    root = tmp / mode / "repo"
    make_repo(root)
    turn_script = tmp / mode / "turn.json"
    turn_script.write_text(json.dumps(script(steps)))
    options = {
        "model": f"scripted/{turn_script}",
        "approval": "auto-edit",
        "maxSteps": steps,
        "db": str(tmp / mode / "feedback.db"),
    }
    client = await Client.start(mode, tmp / mode / "home")
    try:
        report["initialize"] = await initialize(client, root, options)
        uri = open_app(client, root)
        start = time.monotonic()
        await sample(client, uri, lambda: time.monotonic() - start > 3.0, found["start-up"])
        report["settled_after_s"] = await settle(client)
        start = time.monotonic()
        await sample(client, uri, lambda: time.monotonic() - start > seconds, found["idle"])
        report["initialize"]["server_ms"] = (await status(client))["startup"]["initializeMs"]
        report["turn"] = await ask_while_sampling(client, uri, found["turn"], "tidy the project", 300)
    finally:
        await client.stop()
    if embedded:
        report["embedded"] = await run_embedded(mode, tmp, embedded, found["embedded"])
    return report


async def run_embedded(mode: str, tmp: Path, seconds: float, into: dict[str, list[float]]) -> dict[str, Any]:
    root = tmp / mode / "repo"
    options = {"model": "local/smollm2", "approval": "auto-edit", "maxSteps": 6, "db": str(tmp / mode / "feedback.db")}
    client = await Client.start(mode, tmp / mode / "home")
    try:
        await initialize(client, root, options)
        uri = open_app(client, root)
        await settle(client)
        report = await ask_while_sampling(client, uri, into, "Explain what app.py does.", seconds)
    finally:
        exited = await client.stop()
    report["exit_s"] = round(exited, 1) if exited is not None else "killed: did not exit after shutdown"
    return report


def summary(label: str, values: list[float]) -> str:
    if not values:
        return f"{label:<12} (no samples)"
    ms = [v * 1000 for v in values]
    return f"{label:<12} p50 {statistics.median(ms):6.1f} ms  p99 {percentile(ms, 0.99):6.1f} ms  n={len(ms)}"


def p99(report: dict[str, Any], phase: str, kind: str) -> float | None:
    values = report["samples"][phase][kind]
    return percentile(values, 0.99) * 1000 if values else None


def show(reports: dict[str, dict[str, Any]]) -> None:
    for mode, report in reports.items():
        init = report["initialize"]
        print(f"\n== turn_process = {mode}")
        print(
            f"initialize: {init['from_spawn'] * 1000:.0f} ms from spawn to answer "
            f"(server's own handling {init.get('server_ms', float('nan')):.1f} ms); "
            f"settled {report['settled_after_s']:.0f} s after start-up"
        )
        for extra in ("turn", "embedded"):
            if extra in report:
                print(f"{extra}: {report[extra]}")
        for phase, kinds in report["samples"].items():
            for kind, values in kinds.items():
                print(f"  {phase:<9} {summary(kind, values)}")
    print("\n== ratios (p99 / idle p99 of the same server)")
    for mode, report in reports.items():
        for phase in ("start-up", "turn", "embedded"):
            cells = []
            for kind in KINDS:
                busy, idle = p99(report, phase, kind), p99(report, "idle", kind)
                cells.append(f"{kind} {busy / idle:.1f}x" if busy and idle else f"{kind} -")
            print(f"  {mode:<7} {phase:<9} " + ", ".join(cells))
    if {"inline", "worker"} <= set(reports):
        print("\n== inline p99 / worker p99 (same phase)")
        for phase in ("start-up", "idle", "turn", "embedded"):
            cells = []
            for kind in KINDS:
                inline, worker = p99(reports["inline"], phase, kind), p99(reports["worker"], phase, kind)
                cells.append(f"{kind} {inline / worker:.1f}x" if inline and worker else f"{kind} -")
            print(f"  {phase:<9} " + ", ".join(cells))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=400, help="steps of the scripted turn")
    parser.add_argument("--seconds", type=float, default=12.0, help="seconds of sampling on the idle server")
    parser.add_argument("--modes", default="inline,worker", help="turn processes to measure, in order")
    parser.add_argument(
        "--embedded-seconds",
        type=float,
        default=30.0,
        help="seconds of sampling while the embedded model generates (0: skip that phase)",
    )
    args = parser.parse_args()
    reports = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes.split(","):
            reports[mode] = await run_mode(mode, Path(tmp), args.steps, args.seconds, args.embedded_seconds)
    print(f"lsp latency, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    show(reports)


if __name__ == "__main__":
    asyncio.run(main())
