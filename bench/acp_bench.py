"""The ACP agent beside the language server, in one run: what an editor waits for during a turn.

Both doors run the same scripted turn (--steps steps of reads, searches, listings, edits and creates,
bench/lsp_latency.py's script) on their own copy of one repository, with turns in a worker process,
twice each (the first turn also opens the session; the second is warm). Measured per turn, from the
editor's side of stdio:

- first update: from sending the prompt (`session/prompt`; `workspace/executeCommand teachback.ask`)
  to the first message about the turn (any `session/update`; any `teachback/event`), and to the first
  piece of the model's text (`agent_message_chunk`; a `teachback/event` of an assistant delta);
- per-update overhead: for each tool call's start and end, the time from the agent emitting the
  event in its worker (the event's `ts`, recorded in the store) to the editor receiving the update
  that says it; p50 and p99 over the turn, and the turn's wall time;
- initialize: from spawning the process to its answer.

ACP runs twice: with the editor serving fs/read_text_file and fs/write_text_file (as Zed does: each
read and write is a round trip to the editor) and without. The editor answers at once and keeps no
buffers. Ratios are ACP / LSP; the last line with --json is one JSON object of every figure.

Run: .venv/bin/python bench/acp_bench.py [--steps 160] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from lsp_latency import Client, initialize, make_repo, percentile, script, settle  # noqa: E402

TEACHBACK = Path(sys.executable).with_name("teachback")
TIMED = {"tool_call_started": "tool_call", "tool_call_finished": "tool_call_update"}


class AcpEditor:
    """`teachback acp` on newline-delimited JSON-RPC: every message timed on arrival; fs/* answered
    from the disk when offered, permissions allowed."""

    def __init__(self, process: asyncio.subprocess.Process, fs: bool) -> None:
        self.process = process
        self.fs = fs
        self.spawned = time.perf_counter()
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.next_id = 0
        self.updates: list[tuple[float, float, dict[str, Any]]] = []  # (perf, wall clock, update)
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, home: Path, root: Path, model: str, fs: bool, steps: int) -> AcpEditor:
        env = {
            **os.environ,
            "TEACHBACK_HOME": str(home),
            "TEACHBACK_MODEL": model,
            "TEACHBACK_APPROVAL": "full-auto",
            "TEACHBACK_MAX_STEPS": str(steps + 5),
        }
        process = await asyncio.create_subprocess_exec(
            str(TEACHBACK),
            "acp",
            cwd=str(root),
            env=env,
            limit=2**26,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        return cls(process, fs)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    async def request(self, method: str, params: Any, timeout: float = 900) -> dict[str, Any]:
        msg_id, self.next_id = self.next_id, self.next_id + 1
        future = self.pending[msg_id] = asyncio.get_running_loop().create_future()
        self.send({"id": msg_id, "method": method, "params": params})
        answer = await asyncio.wait_for(future, timeout)
        assert "result" in answer, answer
        return answer["result"]

    async def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while line := await stdout.readline():
            now, wall = time.perf_counter(), time.time()
            message = json.loads(line)
            method = message.get("method")
            if method == "session/update":
                self.updates.append((now, wall, message["params"]["update"]))
            elif method is not None and "id" in message:
                try:
                    self.send({"id": message["id"], "result": self._answer(method, message["params"])})
                except OSError as exc:  # the agent falls back on the disk
                    self.send({"id": message["id"], "error": {"code": -32603, "message": str(exc)}})
            elif message.get("id") in self.pending:
                self.pending.pop(message["id"]).set_result(message)

    def _answer(self, method: str, params: dict[str, Any]) -> Any:
        if method == "fs/read_text_file":
            return {"content": Path(params["path"]).read_text(encoding="utf-8")}
        if method == "fs/write_text_file":  # a new file's folder too, as an editor's save does
            Path(params["path"]).parent.mkdir(parents=True, exist_ok=True)
            Path(params["path"]).write_text(params["content"], encoding="utf-8")
            return {}
        if method == "session/request_permission":
            return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
        return None

    async def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 60)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        self.reader.cancel()


class LspEditor(Client):
    """bench/lsp_latency.py's client, keeping the `teachback/event` notifications, timed."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.events: list[tuple[float, float, dict[str, Any]]] = []
        super().__init__(process)

    def _received(self, message: dict[str, Any], now: float) -> None:
        if message.get("method") == "teachback/event":
            self.events.append((now, time.time(), message["params"]))
        else:
            super()._received(message, now)


def _summary(sent: float, arrivals: list[float], first_text: float | None, lags: list[float], ended: float) -> dict:
    return {
        "first_update_ms": (min(arrivals) - sent) * 1000 if arrivals else None,
        "first_text_ms": (first_text - sent) * 1000 if first_text is not None else None,
        "updates": len(arrivals),
        "lag_p50_ms": statistics.median(lags) * 1000 if lags else None,
        "lag_p99_ms": percentile(lags, 0.99) * 1000 if lags else None,
        "turn_s": ended - sent,
    }


def _emitted(home: Path, session_id: str) -> dict[tuple[str, str], float]:
    """(update kind, call id) -> when the worker emitted the event behind it (from the store)."""
    from feedback_store import open_store

    with open_store(home / "feedback.db") as store:
        events = store.events(session_id)
    return {(TIMED[e["type"]], e["call_id"]): e["ts"] for e in events if e["type"] in TIMED}


async def acp_turns(tmp: Path, model: str, steps: int, fs: bool) -> dict[str, Any]:
    label = "acp-fs" if fs else "acp"
    root, home = tmp / label / "repo", tmp / label / "home"
    make_repo(root)
    editor = await AcpEditor.start(home, root, model, fs, steps)
    report: dict[str, Any] = {}
    try:
        capabilities = {"fs": {"readTextFile": fs, "writeTextFile": fs}}
        await editor.request("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
        report["initialize_ms"] = (time.perf_counter() - editor.spawned) * 1000
        session_id = (await editor.request("session/new", {"cwd": str(root), "mcpServers": []}))["sessionId"]
        await settle(editor)  # type: ignore[arg-type]
        for number in (1, 2):
            editor.updates.clear()
            sent = time.perf_counter()
            prompt = [{"type": "text", "text": "tidy the project"}]
            answer = await editor.request("session/prompt", {"sessionId": session_id, "prompt": prompt})
            ended = time.perf_counter()
            emitted = _emitted(home, session_id)
            lags = []
            for _, wall, update in editor.updates:
                call = update.get("toolCallId", "").split(":", 1)[-1]
                kind = update["sessionUpdate"]
                if (kind, call) in emitted and (kind == "tool_call" or update.get("status") in ("completed", "failed")):
                    lags.append(wall - emitted[(kind, call)])
            texts = [t for t, _, u in editor.updates if u["sessionUpdate"] == "agent_message_chunk"]
            arrivals = [t for t, _, _ in editor.updates]
            report[f"turn{number}"] = {
                **_summary(sent, arrivals, texts[0] if texts else None, lags, ended),
                "stop": answer["stopReason"],
            }
    finally:
        await editor.stop()
    return report


async def lsp_turns(tmp: Path, model: str, steps: int) -> dict[str, Any]:
    root, home = tmp / "lsp" / "repo", tmp / "lsp" / "home"
    make_repo(root)
    options = {"model": model, "approval": "full-auto", "maxSteps": steps + 5, "db": str(home / "feedback.db")}
    editor = await LspEditor.start("worker", home)
    report: dict[str, Any] = {}
    try:
        report["initialize_ms"] = (await initialize(editor, root, options))["from_spawn"] * 1000
        await settle(editor)
        for number in (1, 2):
            editor.events.clear()
            sent = time.perf_counter()
            params = {"command": "teachback.ask", "arguments": [{"instruction": "tidy the project"}]}
            _, answer = await editor.request("workspace/executeCommand", params, timeout=900)
            ended = time.perf_counter()
            lags = [wall - e["ts"] for _, wall, e in editor.events if e["type"] in TIMED]
            texts = [t for t, _, e in editor.events if e["type"] == "assistant_delta"]
            arrivals = [t for t, _, _ in editor.events]
            report[f"turn{number}"] = {
                **_summary(sent, arrivals, texts[0] if texts else None, lags, ended),
                "stop": answer.get("result", {}).get("reason"),
            }
    finally:
        await editor.stop()
    return report


def _ratio(acp: float | None, lsp: float | None) -> str:
    return f"{acp / lsp:.2f}x" if acp and lsp else "-"


def show(reports: dict[str, dict[str, Any]], steps: int) -> None:
    print(f"acp bench: {steps} steps per turn, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    keys = ("first_update_ms", "first_text_ms", "lag_p50_ms", "lag_p99_ms", "turn_s", "updates")
    for door, report in reports.items():
        print(f"\n== {door}: initialize {report['initialize_ms']:.0f} ms from spawn")
        for turn in ("turn1", "turn2"):
            cells = ", ".join(f"{k} {report[turn][k]:.1f}" for k in keys if report[turn][k] is not None)
            print(f"  {turn} ({report[turn]['stop']}): {cells}")
    print("\n== ratios, ACP / LSP (same turn)")
    for door in ("acp-fs", "acp"):
        for turn in ("turn1", "turn2"):
            cells = [f"{k} {_ratio(reports[door][turn][k], reports['lsp'][turn][k])}" for k in keys[:5]]
            print(f"  {door:<6} {turn}: " + ", ".join(cells))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--steps", type=int, default=160, help="steps of the scripted turn (a multiple of 20 undoes its edits)"
    )
    parser.add_argument("--json", action="store_true", help="print every figure as one JSON object last")
    args = parser.parse_args()
    reports: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        turn = tmp / "turn.json"
        # Two turns of the same steps, each ended by a reply without a call (the scripted model
        # picks its reply by the number of assistant messages in the conversation).
        end = {"content": "Tidied.", "tool_calls": []}
        turn.write_text(json.dumps([*script(args.steps), end, *script(args.steps), end]))
        model = f"scripted/{turn}"
        reports["lsp"] = await lsp_turns(tmp, model, args.steps)
        reports["acp-fs"] = await acp_turns(tmp, model, args.steps, fs=True)
        reports["acp"] = await acp_turns(tmp, model, args.steps, fs=False)
    show(reports, args.steps)
    if args.json:
        print(json.dumps({"steps": args.steps, "cores": os.cpu_count(), **reports}))


if __name__ == "__main__":
    asyncio.run(main())
