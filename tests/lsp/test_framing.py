"""Broken frames: the server drops the bad frame, says so, and answers the next request.

Each kind of bad frame is sent to the real server over stdio, followed by a good request. Every
kind here is recovered from (none needs the process to exit): a JSON body never holds a raw
`Content-Length:` line, so the next header is a safe place to resume. Two kinds are not errors
at all and their own request is answered too: LF-only header lines and a repeated, identical
Content-Length. The process exits non-zero only when the stream ends inside a frame.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path

import pytest

from lsp_server.framing import BadFrame, FrameParser, Message, NotJson
from tests.lsp.harness import REPO
from tests.lsp.raw_client import RawClient, RawServer, frame, status_request

BODY = json.dumps(status_request(1)).encode()  # the request inside the bad frame
N = len(BODY)

# kind -> (the bad frame's bytes, whether its own request is answered)
BAD_FRAMES: dict[str, tuple[bytes, bool]] = {
    "missing Content-Length": (b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + BODY, False),
    "non-numeric": (b"Content-Length: twelve\r\n\r\n" + BODY, False),
    "negative": (b"Content-Length: -%d\r\n\r\n" % N + BODY, False),
    "float": (b"Content-Length: %d.0\r\n\r\n" % N + BODY, False),
    # declares 500 bytes more than the next frame holds: waiting for them would hang for ever
    "short, next frame smaller than the gap": (b"Content-Length: %d\r\n\r\n" % (N + 500) + BODY, False),
    # the declared end falls inside the next frame's "Content-Length:" word
    "short, gap inside the next header": (b"Content-Length: %d\r\n\r\n" % (N + 6) + BODY, False),
    "longer than declared": (b"Content-Length: %d\r\n\r\n" % (N - 9) + BODY, False),
    "conflicting duplicate": (b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (N, N + 40) + BODY, False),
    "identical duplicate": (b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (N, N) + BODY, True),
    "LF-only header lines": (b"Content-Length: %d\n\n" % N + BODY, True),
    "huge (10**12)": (b"Content-Length: 1000000000000\r\n\r\n" + BODY, False),
    "no blank line after the header": (b"Content-Length: %d\r\n" % N + BODY, False),
    "binary junk, no header": (b"\x00\xff\xfe junk \x1b[0m\r\n\r\n", False),
    "endless header line (20 KB)": (b"X-Padding: " + b"a" * 20_000 + b"\r\n\r\n" + BODY, False),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", list(BAD_FRAMES))
async def test_a_bad_frame_is_dropped_and_the_next_request_answered(git_repo: Path, tmp_path: Path, kind: str) -> None:
    bad, answered = BAD_FRAMES[kind]
    server = await RawServer.start(tmp_path / "server.log")
    try:
        assert "result" in await server.initialize(git_repo)
        await server.send_raw(bad + frame(status_request(2)))
        good = await server.answer(2)
        assert good["result"]["workspace"] == str(git_repo)
        if answered:
            assert (await server.answer(1))["result"]["workspace"] == str(git_repo)
        else:
            assert not server.answered(1)  # answers come in order: 1 would have come before 2
            assert "dropped a malformed message" in server.logged()
            assert "resumed at the next Content-Length header" in server.log()
        assert await server.stop() == 0
    finally:
        await server.close()


@pytest.mark.timeout(60)
async def test_a_body_that_is_not_json_gets_a_parse_error(git_repo: Path, tmp_path: Path) -> None:
    server = await RawServer.start(tmp_path / "server.log")
    try:
        await server.initialize(git_repo)
        await server.send_raw(b"Content-Length: 9\r\n\r\n{not json" + frame(status_request(2)))
        error = await server.answer(None)
        assert error["error"]["code"] == -32700 and "not JSON" in error["error"]["message"]
        assert "result" in await server.answer(2)
        assert await server.stop() == 0
    finally:
        await server.close()


@pytest.mark.timeout(60)
async def test_every_bad_frame_in_one_stream_still_leaves_the_server_listening(git_repo: Path, tmp_path: Path) -> None:
    server = await RawServer.start(tmp_path / "server.log")
    try:
        await server.initialize(git_repo)
        await server.send_raw(b"".join(bad for bad, _ in BAD_FRAMES.values()) + frame(status_request(2)))
        assert "result" in await server.answer(2)
        assert server.process.returncode is None
        assert await server.stop() == 0
    finally:
        await server.close()


@pytest.mark.timeout(60)
async def test_a_stream_that_ends_inside_a_frame_exits_non_zero(git_repo: Path, tmp_path: Path) -> None:
    server = await RawServer.start(tmp_path / "server.log")
    try:
        await server.initialize(git_repo)
        await server.send_raw(b"Content-Length: %d\r\n\r\n" % N + BODY[:10])
        server.writer.close()
        assert await server.exit_status() == 1
        assert "ended inside a message" in server.log()
    finally:
        await server.close()


@pytest.mark.timeout(60)
async def test_exit_without_shutdown_exits_non_zero(git_repo: Path, tmp_path: Path) -> None:
    server = await RawServer.start(tmp_path / "server.log")
    try:
        await server.initialize(git_repo)
        await server.send({"jsonrpc": "2.0", "method": "exit"})
        assert await server.exit_status() == 1
    finally:
        await server.close()


@pytest.mark.timeout(60)
async def test_tcp_recovers_from_a_bad_frame_too(git_repo: Path, tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (tmp_path / "server.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "lsp_server", "--tcp", f"127.0.0.1:{port}", cwd=str(REPO), stderr=log
        )
    try:
        reader, writer = await _connect(port)
        client = RawClient(reader, writer)
        await client.initialize(git_repo)
        await client.send_raw(BAD_FRAMES["non-numeric"][0] + frame(status_request(2)))
        assert "result" in await client.answer(2)
        assert "dropped a malformed message" in client.logged()
        writer.close()
        assert await asyncio.wait_for(process.wait(), 15) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def _connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    for _ in range(200):
        try:
            return await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"the server never listened on port {port}")


# -- the parser alone: every split of the stream gives the same messages ------------------------


@pytest.mark.parametrize("kind", list(BAD_FRAMES))
@pytest.mark.parametrize("piece", [1, 3, 64, 1 << 20])
def test_parser_recovers_whatever_the_chunking(kind: str, piece: int) -> None:
    bad, answered = BAD_FRAMES[kind]
    stream = bad + frame(status_request(2))
    parser = FrameParser()
    events = [e for i in range(0, len(stream), piece) for e in parser.feed(stream[i : i + piece])]
    ids = [e.data["id"] for e in events if isinstance(e, Message)]
    assert ids == ([1, 2] if answered else [2])
    assert answered or any(isinstance(e, BadFrame) for e in events)
    assert not parser.mid_frame


def test_parser_caps_the_body_it_will_hold() -> None:
    parser = FrameParser(max_body=200)
    events = parser.feed(b"Content-Length: 201\r\n\r\n" + b" " * 201 + frame(status_request(2)))
    assert isinstance(events[0], BadFrame) and "over the 200 byte limit" in events[0].reason
    assert [e.data["id"] for e in events if isinstance(e, Message)] == [2]


def test_parser_waits_for_a_body_that_is_still_arriving() -> None:
    parser = FrameParser()
    whole = frame(status_request(2))
    assert parser.feed(whole[:-5]) == [] and parser.mid_frame
    assert parser.feed(whole[-5:]) == [Message(status_request(2))]


def test_parser_reports_deeply_nested_json_as_not_json() -> None:
    body = b"[" * 100_000 + b"]" * 100_000
    events = FrameParser().feed(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    assert len(events) == 1 and isinstance(events[0], NotJson)
