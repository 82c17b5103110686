"""An MCP server that breaks the protocol, written without the library so that it can: run as
`python hostile_server.py`. It does the handshake and lists its tools like any server; then
`noise` sends lines that are not JSON-RPC (text, a JSON value that is not a message, a message
of the wrong shape) before its real answer, and `scalar`, `array` and `text` answer with a
`result` that is not an object."""

from __future__ import annotations

import json
import sys

TOOLS = [
    {"name": name, "description": about, "inputSchema": {"type": "object", "properties": {}}}
    for name, about in (
        ("noise", "Lines that are not JSON-RPC, then a good answer."),
        ("scalar", "A result that is a number."),
        ("array", "A result that is a list."),
        ("text", "A result that is a string."),
    )
]
NOISE = ("this line is not JSON", "[1, 2, 3]", '{"jsonrpc": "2.0", "method": 5}', '{"jsonrpc": "1.0", "id": "x"}')
NOT_OBJECTS = {"scalar": 42, "array": [1, 2], "text": "done"}


def send(message: object) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request: dict) -> None:
    method, ident = request.get("method"), request.get("id")
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": ident,
                "result": {
                    "protocolVersion": request["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        name = request["params"]["name"]
        if name in NOT_OBJECTS:
            send({"jsonrpc": "2.0", "id": ident, "result": NOT_OBJECTS[name]})
            return
        for line in NOISE:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
        send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": "after the noise"}]}})
    elif ident is not None:
        send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    for line in sys.stdin:
        if line.strip():
            answer(json.loads(line))
