"""Running one command hook: the event as JSON on its stdin, in the workspace root, under /bin/sh,
in a process group of its own that is killed whole at the hook's timeout; what it prints is read up
to a bound, and the rest is drained and dropped so a flood cannot fill memory or stall the hook."""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.tools.commands import kill_group

MAX_OUTPUT_BYTES = 64_000  # of each of stdout and stderr
CHUNK = 65_536


@dataclass(frozen=True)
class Ran:
    """What one hook process did. `exit_code` None: it did not end by itself (killed at its
    timeout) or could not start (`start_error`)."""

    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    start_error: str | None = None
    ms: float = 0.0


async def run_hook(command: str, payload: dict[str, Any], *, timeout: float, root: Path) -> Ran:
    """Run `command` with `payload` on its stdin; never raises for anything the hook does."""
    clock = time.perf_counter()
    env = {**os.environ, "CLAUDE_PROJECT_DIR": str(root), "TEACHBACK_PROJECT_DIR": str(root), "TEACHBACK_HOOK": "1"}
    try:
        process = await asyncio.create_subprocess_shell(
            command,
            cwd=root,
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group: a timeout kills what it started too
        )
    except OSError as exc:
        return Ran(None, start_error=exc.strerror or str(exc), ms=_since(clock))
    data = json.dumps(payload, ensure_ascii=False).encode("utf-8", "replace")
    try:
        out, err = await asyncio.wait_for(_talk(process, data), timeout)
    except (TimeoutError, asyncio.CancelledError) as exc:
        kill_group(process)
        await process.wait()
        if isinstance(exc, asyncio.CancelledError):
            raise
        return Ran(None, timed_out=True, ms=_since(clock))
    return Ran(process.returncode, out, err, ms=_since(clock))


async def _talk(process: asyncio.subprocess.Process, data: bytes) -> tuple[str, str]:
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    out, err, _ = await asyncio.gather(_bounded(process.stdout), _bounded(process.stderr), _feed(process.stdin, data))
    await process.wait()
    return out, err


async def _feed(stdin: asyncio.StreamWriter, data: bytes) -> None:
    """Write the event; a hook that exits without reading it is not an error."""
    try:
        stdin.write(data)
        await stdin.drain()
        stdin.close()
        await stdin.wait_closed()
    except (BrokenPipeError, ConnectionResetError):
        return


async def _bounded(stream: asyncio.StreamReader) -> str:
    kept = bytearray()
    dropped = 0
    while chunk := await stream.read(CHUNK):
        room = MAX_OUTPUT_BYTES - len(kept)
        kept += chunk[:room]
        dropped += max(0, len(chunk) - room)
    text = kept.decode("utf-8", "replace")
    return f"{text}\n[... {dropped:,} more bytes dropped]" if dropped else text


def _since(clock: float) -> float:
    return (time.perf_counter() - clock) * 1000
