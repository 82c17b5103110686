"""A seeded fuzz of `teachback acp` over its real stdio: a few hundred lines, each a JSON-RPC message
bent out of shape (ids of every JSON type, unknown or mistyped methods, junk params, responses to
nothing, lines cut short, bytes that are not text, nesting 100,000 deep). The agent must answer
every line that asks for an answer, exactly once, and still answer a good request at the end."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from tests.acp.raw_agent import RawAgent, agent_env
from tests.acp.test_hostile import DEEP, INITIALIZE

SEED = 38
LINES = 300
METHODS = [
    "initialize", "authenticate", "session/new", "session/load", "session/prompt", "session/cancel",
    "session/set_mode", "session/set_model", "session/list", "fs/read_text_file", "_teachback/probe", "", "/",
]  # fmt: skip


def _scalar(rng: random.Random) -> Any:
    return rng.choice(
        [
            None, True, False, 0, -1, 2**80, -(2**63), 1.5, -0.0, 1e300, "", "x", "ünï\u2028cödé", "\ud800",
            "a" * rng.randint(0, 5000), "/", "../../x", "phantom-1",
        ]
    )  # fmt: skip


def _value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 4 or roll < 0.5:
        return _scalar(rng)
    if roll < 0.75:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ["sessionId", "cwd", "prompt", "mcpServers", "protocolVersion", "_meta", "type", "text", "x"]
    return {rng.choice(keys): _value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def _params(rng: random.Random, method: str, home: Path) -> Any:
    """Params near what the method takes, so that the fuzz reaches the handlers and not only the schema."""
    cwd = rng.choice(["/", "", "relative", "/no/such/folder", str(home), _scalar(rng)])
    session = rng.choice(["phantom-1", "", "../../x", _scalar(rng)])
    near = {
        "initialize": {"protocolVersion": rng.choice([1, 0, 2**80, -5, "1", None])},
        "session/new": {"cwd": cwd, "mcpServers": rng.choice([[], [_value(rng)], _value(rng)])},
        "session/load": {"cwd": cwd, "sessionId": session, "mcpServers": []},
        "session/prompt": {"sessionId": session, "prompt": rng.choice([[{"type": "text", "text": "hi"}], _value(rng)])},
        "session/cancel": {"sessionId": session},
    }.get(method, {})
    if rng.random() < 0.3:
        near["_meta"] = _value(rng)
    return near if rng.random() < 0.7 else _value(rng)


def _line(rng: random.Random, home: Path) -> bytes:
    method = rng.choice(METHODS) if rng.random() < 0.9 else _scalar(rng)
    message: dict[str, Any] = {"jsonrpc": rng.choice(["2.0"] * 8 + ["1.0", None]), "method": method}
    message["params"] = _params(rng, method if isinstance(method, str) else "", home)
    if rng.random() < 0.8:
        message["id"] = rng.choice([rng.randint(0, 10**6), _scalar(rng), _value(rng)])
    shape = rng.random()
    if shape < 0.1:  # a response to nothing
        message = {"jsonrpc": "2.0", "id": message.get("id"), rng.choice(["result", "error"]): _value(rng)}
    elif shape < 0.2:
        message.pop(rng.choice(list(message)))
    elif shape < 0.25:
        return json.dumps(_value(rng)).encode()  # any JSON value, objects included
    line = json.dumps(message).encode()
    bend = rng.random()
    if bend < 0.08:
        return line[: rng.randint(0, len(line))]  # cut short
    if bend < 0.12:
        return bytes(rng.choice([b for b in range(256) if b != 10]) for _ in range(rng.randint(1, 64)))
    if bend < 0.15:
        return (
            line.replace(b'"params": ', b'"params": ' + DEEP[:100_000] + b"1" + DEEP[100_000:] + b", ", 1)[:-1] + b"}"
        )
    return line


def _asks_for_an_answer(line: bytes) -> bool:
    """JSON-RPC's rule: a request is answered, and so is a line that cannot be read as a message at all;
    a notification and a response are not."""
    if not line.strip():
        return False
    try:
        data = json.loads(line, parse_constant=_refuse)
    except (ValueError, RecursionError):
        return True
    if not isinstance(data, dict):
        return True
    response = "method" not in data and "id" in data and ("result" in data or "error" in data)
    return "id" in data and not response


def _refuse(name: str) -> Any:
    raise ValueError(name)


@pytest.mark.timeout(240)
async def test_a_seeded_fuzz_leaves_the_agent_answering(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    home = tmp_path / "home"
    home.mkdir()
    lines = [_line(rng, home) for _ in range(LINES)]
    expected = sum(_asks_for_an_answer(line) for line in lines)
    agent = await RawAgent.start(tmp_path / "agent.log", agent_env("scripted/none.json", HOME=str(home)), tmp_path)
    try:
        for line in lines:
            await agent.send_raw(line + b"\n")
        await agent.send({"jsonrpc": "2.0", "id": "final", "method": "initialize", "params": INITIALIZE})
        answers = await agent.drain_answers(expected + 1, timeout=180)
        assert all(a["jsonrpc"] == "2.0" and ("result" in a) != ("error" in a) for a in answers)
        assert all(isinstance(a["error"]["code"], int) and a["error"]["message"] for a in answers if "error" in a)
        final = [a for a in answers if a["id"] == "final"]
        assert len(final) == 1 and final[0]["result"]["agentInfo"]["name"] == "teachback"
        assert "result" in await agent.request("last", "initialize", INITIALIZE)
        assert agent.responses == []  # nothing answered twice
        assert await agent.close() == 0
    finally:
        await agent.close()
    assert "Traceback" not in agent.log()
