"""`teachback acp` spoken to as raw lines: a test sends whatever bytes it likes and reads every
message the agent writes back, each read with a timeout. The ACP libraries' clients cannot send a
broken line, so the tests of hostile input speak the wire format themselves."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from tests.acp.conftest import TEACHBACK

READ_TIMEOUT = 30.0
READ_LIMIT = 64 * 1024 * 1024  # an answer echoes an id as sent, and ids may be large


def id_key(msg_id: Any) -> str:
    """An id as JSON: tells `true` from `1` and `1.5` from `"1.5"`, as the wire does."""
    return json.dumps(msg_id, sort_keys=True)


def agent_env(model: str, **extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/nonexistent"),
        "TEACHBACK_HOME": os.environ["TEACHBACK_HOME"],
        "TEACHBACK_MODEL": model,
        "TEACHBACK_APPROVAL": "full-auto",
        "TEACHBACK_LOG_LEVEL": "INFO",
    }
    if "PYTHONPATH" in os.environ:  # the code under test, in the agent and its workers too
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return {**env, **extra}


class RawAgent:
    def __init__(self, process: asyncio.subprocess.Process, log_path: Path) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.log_path = log_path
        self.responses: list[dict[str, Any]] = []  # answers not yet taken by `answer`
        self.notifications: list[dict[str, Any]] = []

    @classmethod
    async def start(cls, log_path: Path, env: dict[str, str], cwd: Path, *args: str) -> RawAgent:
        with log_path.open("wb") as log:
            process = await asyncio.create_subprocess_exec(
                str(TEACHBACK),
                "acp",
                *args,
                cwd=str(cwd),
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                limit=READ_LIMIT,
            )
        return cls(process, log_path)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    async def send_raw(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        await self.process.stdin.drain()

    async def send(self, message: Any) -> None:
        await self.send_raw(json.dumps(message).encode() + b"\n")

    async def request(self, msg_id: Any, method: str, params: Any) -> dict[str, Any]:
        await self.send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        return await self.answer(msg_id)

    async def answer(self, msg_id: Any, timeout: float = READ_TIMEOUT) -> dict[str, Any]:
        """The first answer not yet taken whose id is `msg_id` exactly (taken: a repeated id's next
        answer is the next call's)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            for at, message in enumerate(self.responses):
                if id_key(message["id"]) == id_key(msg_id):
                    return self.responses.pop(at)
            await self._read(deadline, f"answer to id {id_key(msg_id)[:80]}")

    async def drain_answers(self, count: int, timeout: float = READ_TIMEOUT) -> list[dict[str, Any]]:
        """The next `count` answers, whatever their ids."""
        deadline = asyncio.get_running_loop().time() + timeout
        while len(self.responses) < count:
            await self._read(deadline, f"{count} answers (have {len(self.responses)})")
        taken, self.responses = self.responses[:count], self.responses[count:]
        return taken

    async def _read(self, deadline: float, what: str) -> None:
        assert self.process.stdout is not None
        left = deadline - asyncio.get_running_loop().time()
        try:
            line = await asyncio.wait_for(self.process.stdout.readline(), max(left, 0.01))
        except TimeoutError:
            raise TimeoutError(f"no {what} in time; agent log:\n{self.log()[-3000:]}") from None
        if not line:
            raise EOFError(f"the agent closed its output waiting for {what}; agent log:\n{self.log()[-3000:]}")
        message = json.loads(line)
        if "method" in message and "id" in message:
            raise AssertionError(f"the agent asked the editor something this client does not serve: {message}")
        (self.notifications if "method" in message else self.responses).append(message)

    async def close(self) -> int:
        """Close its input (the editor went away) and return its exit status."""
        assert self.process.stdin is not None
        if not self.process.stdin.is_closing():
            self.process.stdin.close()
        try:
            return await asyncio.wait_for(self.process.wait(), 30)
        finally:
            if self.process.returncode is None:
                self.process.kill()
                await self.process.wait()
