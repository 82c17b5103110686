"""Editors for `teachback acp`: the ACP TypeScript library's client (driver.mjs, run by node) and the
Python library's (py_driver.py), each given the same plan; `drive` runs a plan on each in turn."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.acp.py_driver import run as run_python

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
TEACHBACK = Path(sys.executable).with_name("teachback")
TIMEOUT = 180  # seconds for one plan: two cores shared with other tests


def _run_typescript(plan: dict[str, Any]) -> dict[str, Any]:
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the checks with the ACP TypeScript library need node 20 or newer")
    if not (HERE / "node_modules" / "@agentclientprotocol" / "sdk").is_dir():
        pytest.fail("the ACP TypeScript library is not installed: run `npm ci --prefix tests/acp` (.ci/run does)")
    done = subprocess.run(
        ["node", str(HERE / "driver.mjs")], input=json.dumps(plan), capture_output=True, text=True, timeout=TIMEOUT
    )
    assert done.returncode == 0, f"driver.mjs failed:\n{done.stderr}\nagent log:\n{_log(plan)}"
    return json.loads(done.stdout)


def _log(plan: dict[str, Any]) -> str:
    path = Path(plan["stderr"])
    return path.read_text(errors="replace")[-4000:] if path.exists() else "(none)"


DRIVERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "typescript": _run_typescript,
    "python": run_python,
}


@pytest.fixture(params=sorted(DRIVERS))
def drive(request: pytest.FixtureRequest, git_repo: Path, tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """`drive(script, prompts, **plan)`: run `teachback acp` on the git_repo workspace with the data
    script as its model, through this parameter's client; the transcript it saw."""
    run = DRIVERS[request.param]

    def go(script: str, prompts: list[str], *, approval: str = "full-auto", **plan: Any) -> dict[str, Any]:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": os.environ.get("HOME", str(tmp_path)),
            "TEACHBACK_HOME": os.environ["TEACHBACK_HOME"],
            "TEACHBACK_MODEL": f"scripted/{DATA / script}",
            "TEACHBACK_APPROVAL": approval,
            "TEACHBACK_LOG_LEVEL": "INFO",
        }
        if "PYTHONPATH" in os.environ:  # the code under test, in the agent and its workers too
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        full = {
            "command": [str(TEACHBACK), "acp"],
            "env": env,
            "cwd": str(git_repo),
            "prompts": prompts,
            "answers": [],
            "buffers": {},
            "fs": True,
            "load": None,
            "cancelAfterToolCalls": None,
            "stderr": str(tmp_path / "agent.log"),
            **plan,
        }
        return run(full)

    go.driver = request.param  # type: ignore[attr-defined]
    return go


def of_kind(updates: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [u for u in updates if u["sessionUpdate"] == kind]


def said(updates: list[dict[str, Any]]) -> str:
    return "".join(u["content"]["text"] for u in of_kind(updates, "agent_message_chunk"))
