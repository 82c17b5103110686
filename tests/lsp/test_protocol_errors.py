"""Requests the server cannot serve get an error answer, never silence (raw JSON-RPC over stdio)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pygls.uris import from_fs_path

from tests.lsp.raw_client import RawServer, request, status_request

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601


@pytest.fixture
async def server(git_repo: Path, tmp_path: Path):
    server = await RawServer.start(tmp_path / "server.log")
    try:
        assert "result" in await server.initialize(git_repo)
        yield server
    finally:
        await server.close()


@pytest.mark.timeout(60)
async def test_after_shutdown_every_request_but_exit_gets_invalid_request(server: RawServer, git_repo: Path) -> None:
    await server.send(request(1, "shutdown"))
    assert (await server.answer(1))["result"] is None
    await server.send(status_request(2))
    await server.send(request(3, "textDocument/hover", _hover_params(git_repo)))
    await server.send(request(4, "shutdown"))
    for msg_id in (2, 3, 4):
        error = (await server.answer(msg_id))["error"]
        assert error["code"] == INVALID_REQUEST and "only the 'exit' notification" in error["message"]
    await server.send({"jsonrpc": "2.0", "method": "exit"})
    assert await server.exit_status() == 0


def _hover_params(root: Path) -> dict[str, Any]:
    return {"textDocument": {"uri": from_fs_path(str(root / "app.py"))}, "position": {"line": 0, "character": 4}}


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "method, params",
    [
        ("textDocument/hover", "valid"),
        ("textDocument/hover", {"position": "nowhere"}),  # params that do not parse: still unsupported
        ("textDocument/completion", "valid"),
        ("textDocument/completion", None),
        ("teachback/noSuchRequest", {"anything": 1}),
        ("$/noSuchRequest", None),
    ],
)
async def test_an_unsupported_method_gets_method_not_found(
    server: RawServer, git_repo: Path, method: str, params: Any
) -> None:
    await server.send(request(7, method, _hover_params(git_repo) if params == "valid" else params))
    error = (await server.answer(7))["error"]
    assert error["code"] == METHOD_NOT_FOUND
    assert method in error["message"] and "does not implement" in error["message"]
    assert "result" in await _status(server, 8)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "message, answered_id, fragment",
    [
        ({key: value for key, value in status_request(5).items() if key != "jsonrpc"}, 5, '"jsonrpc": "2.0"'),
        ({"jsonrpc": "1.0", "id": 5, "method": "shutdown"}, 5, '"jsonrpc": "2.0"'),
        ({"jsonrpc": "2.0", "id": 5}, 5, 'no "method"'),
        ({"jsonrpc": "2.0", "id": "five", "params": {}}, "five", 'no "method"'),
        ({"jsonrpc": "2.0", "id": 5, "method": 42}, 5, '"method" must be a string'),
        ([{"jsonrpc": "2.0", "id": 5, "method": "shutdown"}], None, "one JSON object"),
        ("just a string", None, "one JSON object"),
    ],
)
async def test_a_message_that_is_not_json_rpc_gets_invalid_request(
    server: RawServer, message: Any, answered_id: Any, fragment: str
) -> None:
    await server.send(message)
    error = (await server.answer(answered_id))["error"]
    assert error["code"] == INVALID_REQUEST and fragment in error["message"]
    assert "result" in await _status(server, 8)  # and the server was not shut down by any of them


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "message",
    [
        {"method": "textDocument/didSave", "params": {}},  # a notification without jsonrpc
        {"jsonrpc": "2.0", "params": {}},  # no method, no id
        {"jsonrpc": "2.0", "id": {"nested": 1}, "method": "shutdown"},  # no id that could be answered
        {"jsonrpc": "2.0", "id": 77, "result": None},  # a response to nothing
    ],
)
async def test_a_malformed_message_with_no_id_to_answer_is_dropped(server: RawServer, message: Any) -> None:
    await server.send(message)
    assert "result" in await _status(server, 8)
    assert [m.get("id") for m in server.seen if "method" not in m] == [0, 8]  # nothing answered it
    assert await server.stop() == 0  # not shut down by the message either


@pytest.mark.timeout(60)
async def test_a_known_method_with_bad_params_still_gets_invalid_params(server: RawServer) -> None:
    await server.send(request(5, "textDocument/codeAction", {"textDocument": {"uri": "file:///x.py"}, "range": "all"}))
    assert (await server.answer(5))["error"]["code"] == -32602


async def _status(server: RawServer, msg_id: int) -> dict[str, Any]:
    await server.send(status_request(msg_id))
    return await server.answer(msg_id)


DEEP = b"[" * 100_000 + b"]" * 100_000
# The bodies that once stopped `teachback acp`, framed for the language server: each is refused with
# the error it deserves (body -> code, the answer's id) and the server answers the next request.
HOSTILE_BODIES: list[tuple[bytes, int, Any]] = [
    (b"null", INVALID_REQUEST, None),
    (b"[]", INVALID_REQUEST, None),
    (b"[1, 2]", INVALID_REQUEST, None),
    (b"123", INVALID_REQUEST, None),
    (b'"str"', INVALID_REQUEST, None),
    (b"true", INVALID_REQUEST, None),
    (b"NaN", INVALID_REQUEST, None),
    (b'[{"jsonrpc": "2.0", "id": 3, "method": "shutdown"}]', INVALID_REQUEST, None),
    (b'{"jsonrpc": "2.0", "id": 4, "method": ', PARSE_ERROR, None),
    (b'{"jsonrpc": "2.0", "id": 5, "method": null}', INVALID_REQUEST, 5),
    (b'{"jsonrpc": "2.0", "id": 6, "method": "shutdown", "params": ' + DEEP + b"}", PARSE_ERROR, None),
]


@pytest.mark.timeout(60)
async def test_lines_that_are_not_requests_are_refused_and_the_server_goes_on(server: RawServer) -> None:
    for n, (body, code, msg_id) in enumerate(HOSTILE_BODIES, start=10):
        await server.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        refused = await server.answer(msg_id)
        assert refused["error"]["code"] == code, (body[:60], refused)
        server.seen.remove(refused)  # the next refusal with a null id is a new one
        assert "result" in await _status(server, n)
    assert await server.stop() == 0


@pytest.mark.timeout(60)
async def test_every_id_the_server_can_answer_is_answered_as_sent_and_the_rest_leave_it_listening(
    server: RawServer,
) -> None:
    for msg_id in [2**80, "", "x" * 1_000_000, -1]:
        answer = await _status(server, msg_id)
        assert "result" in answer and type(answer["id"]) is type(msg_id)
    for msg_id in [1.5, True, {"a": [1]}, [1, "x"], None]:  # not LSP ids: nothing to answer them with
        await server.send(status_request(msg_id))
        assert "result" in await _status(server, 8)
    for _ in range(2):  # one id twice: each request is answered
        await server.send(status_request(9))
    while len([m for m in server.seen if m.get("id") == 9 and "result" in m]) < 2:
        await server.read_message()
    assert await server.stop() == 0
