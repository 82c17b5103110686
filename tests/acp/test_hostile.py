"""`teachback acp` under hostile input, over its real stdio: every line that is not a request it can
serve is answered with the JSON-RPC error it deserves (with the request's id exactly as sent), and
the connection, its sessions and their turns go on. A failed `session/load` leaves nothing behind,
and the file system's root and the home folder are refused as a session's folder."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from acp_server.wire import LINE_LIMIT, MAX_DEPTH
from feedback_store import open_store
from tests.acp.conftest import DATA, of_kind, said
from tests.acp.raw_agent import RawAgent, agent_env, id_key

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
INITIALIZE = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}}}
DEEP = b"[" * 100_000 + b"]" * 100_000

# a line -> (the error code of its answer, the id the answer carries)
HOSTILE_LINES: dict[str, tuple[bytes, int, Any]] = {
    "null": (b"null", INVALID_REQUEST, None),
    "empty list": (b"[]", INVALID_REQUEST, None),
    "list": (b"[1, 2]", INVALID_REQUEST, None),
    "number": (b"123", INVALID_REQUEST, None),
    "string": (b'"str"', INVALID_REQUEST, None),
    "true": (b"true", INVALID_REQUEST, None),
    "NaN": (b"NaN", PARSE_ERROR, None),
    "batch": (b'[{"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": 1}}]', INVALID_REQUEST, None),
    "unparsable text": (b'{"jsonrpc": "2.0", "id": 4, "method": ', PARSE_ERROR, None),
    "not UTF-8": (b"\xff\xfe\xfa{}", PARSE_ERROR, None),
    "null method": (b'{"jsonrpc": "2.0", "id": 5, "method": null}', INVALID_REQUEST, 5),
    "params 100,000 deep": (b'{"jsonrpc": "2.0", "id": 6, "method": "initialize", "params": ' + DEEP + b"}", INVALID_REQUEST, 6),
    "oversized": (b'{"jsonrpc": "2.0", "id": 7, "method": "x", "params": "' + b"a" * LINE_LIMIT + b'"}', INVALID_REQUEST, None),
}  # fmt: skip


def _store():
    return open_store(Path(os.environ["TEACHBACK_HOME"]) / "feedback.db")


async def started_agent(tmp_path: Path, cwd: Path, script: str = "noisy_turn.json", *args: str, **env: str) -> RawAgent:
    agent = await RawAgent.start(tmp_path / "agent.log", agent_env(f"scripted/{DATA / script}", **env), cwd, *args)
    try:
        assert "result" in await agent.request(0, "initialize", INITIALIZE)
    except BaseException:
        await agent.close()
        raise
    return agent


@pytest.mark.timeout(180)
async def test_every_hostile_line_is_answered_and_the_connection_and_its_turn_go_on(
    git_repo: Path, tmp_path: Path
) -> None:
    agent = await started_agent(tmp_path, git_repo)
    try:
        session = (await agent.request(1, "session/new", {"cwd": str(git_repo), "mcpServers": []}))["result"]
        prompt = {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": "read twice"}]}
        await agent.send({"jsonrpc": "2.0", "id": "turn", "method": "session/prompt", "params": prompt})
        for n, (line, code, msg_id) in enumerate(HOSTILE_LINES.values()):
            await agent.send_raw(line + b"\n")
            await agent.send({"jsonrpc": "2.0", "id": f"after-{n}", "method": "initialize", "params": INITIALIZE})
            refused = await agent.answer(msg_id)
            assert refused["error"]["code"] == code, refused
            assert refused["jsonrpc"] == "2.0" and refused["error"]["message"]
            assert (await agent.answer(f"after-{n}"))["result"]["agentInfo"]["name"] == "teachback"
        turn = await agent.answer("turn", timeout=120)
        assert turn["result"] == {"stopReason": "end_turn"}
        updates = [n["params"]["update"] for n in agent.notifications if n["method"] == "session/update"]
        assert said(updates).endswith("Done despite the noise.")
        assert [c["status"] for c in of_kind(updates, "tool_call_update")][-1] == "completed"
        assert agent.process.returncode is None
        assert await agent.close() == 0
    finally:
        await agent.close()
    assert "Traceback" not in agent.log()


def test_each_refusal_says_what_is_wrong() -> None:
    from acp_server.wire import Refuse, classify

    said = {name: classify(line) for name, (line, _, _) in HOSTILE_LINES.items() if name != "oversized"}
    assert all(isinstance(verdict, Refuse) for verdict in said.values())
    messages = {name: verdict.answer["error"]["message"] for name, verdict in said.items()}  # type: ignore[union-attr]
    assert "no batches" in messages["batch"] and "not null" in messages["null"]
    assert "NaN is not a JSON value" in messages["NaN"]
    assert '"method" must be a string, not null' in messages["null method"]
    assert f"deeper than {MAX_DEPTH} levels" in messages["params 100,000 deep"]


IDS: list[Any] = [1.5, True, 2**80, "", {"a": [1]}, [1, "x"], None, -0.25, "x" * 1_000_000]
# a request shape -> (the method's error code, whether the request itself is invalid)
SHAPES: dict[str, tuple[dict[str, Any], int]] = {
    "valid, unknown method": ({"jsonrpc": "2.0", "method": "no/such"}, METHOD_NOT_FOUND),
    "no jsonrpc": ({"method": "initialize", "params": INITIALIZE}, INVALID_REQUEST),
    "jsonrpc 1.0": ({"jsonrpc": "1.0", "method": "initialize", "params": INITIALIZE}, INVALID_REQUEST),
    "no method": ({"jsonrpc": "2.0", "params": {}}, INVALID_REQUEST),
    "method a number": ({"jsonrpc": "2.0", "method": 42}, INVALID_REQUEST),
    "method a list": ({"jsonrpc": "2.0", "method": ["initialize"]}, INVALID_REQUEST),
    "params 100,000 deep": ({"jsonrpc": "2.0", "method": "initialize", "params": "DEEP"}, INVALID_REQUEST),
    "bad params": ({"jsonrpc": "2.0", "method": "session/prompt", "params": {"sessionId": 5}}, INVALID_PARAMS),
}


@pytest.mark.timeout(120)
async def test_every_id_is_answered_exactly_as_sent_whatever_its_type(git_repo: Path, tmp_path: Path) -> None:
    agent = await started_agent(tmp_path, git_repo)
    try:
        for msg_id in IDS:
            for shape, code in SHAPES.values():
                line = json.dumps({**shape, "id": msg_id}).encode()
                await agent.send_raw(line.replace(b'"DEEP"', DEEP) + b"\n")
                answer = await agent.answer(msg_id)
                assert id_key(answer["id"]) == id_key(msg_id)  # 1.5 stays 1.5, true stays true
                assert answer["error"]["code"] == code, (shape, answer["error"])
        # two requests with one id: each is answered
        for _ in range(2):
            await agent.send({"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": INITIALIZE})
        assert "result" in await agent.answer(9) and "result" in await agent.answer(9)
        assert await agent.close() == 0
    finally:
        await agent.close()
    assert "Traceback" not in agent.log()


PHANTOMS = ["phantom-1", "", "../../x"]


@pytest.mark.timeout(120)
async def test_a_failed_load_leaves_nothing_and_a_prompt_for_an_unknown_session_is_refused(
    git_repo: Path, tmp_path: Path
) -> None:
    agent = await started_agent(tmp_path, git_repo)
    try:
        for n, phantom in enumerate(PHANTOMS):
            load = await agent.request(
                f"load-{n}", "session/load", {"cwd": str(git_repo), "sessionId": phantom, "mcpServers": []}
            )
            assert load["error"]["code"] == INVALID_PARAMS and "is recorded in" in load["error"]["data"]["details"]
            prompt = {"sessionId": phantom, "prompt": [{"type": "text", "text": "run a turn"}]}
            refused = await agent.request(f"prompt-{n}", "session/prompt", prompt)
            assert refused["error"]["code"] == INVALID_PARAMS
            assert f"no session {phantom!r} here" in refused["error"]["data"]["details"]
        assert await agent.close() == 0
    finally:
        await agent.close()
    with _store() as store:
        assert store.query("SELECT id FROM sessions") == []
        assert store.query("SELECT COUNT(*) AS n FROM events")[0]["n"] == 0


def test_started_on_a_file_or_dev_null_it_says_what_it_needs_and_exits(tmp_path) -> None:
    """The event loop cannot wait on /dev/null or a regular file: it used to print a traceback and hang."""
    import subprocess

    from tests.acp.conftest import TEACHBACK

    with open(tmp_path / "out.txt", "wb") as out:
        done = subprocess.run(
            [str(TEACHBACK), "acp"], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE, timeout=60
        )
    assert done.returncode == 2 and b"Traceback" not in done.stderr
    assert b"must be a pipe from an editor" in done.stderr and b"input and output" in done.stderr
