"""pygls protocol additions: an answer for every request it would drop, and a cancel hook.

Stock pygls 2.1 logs a request whose params fail its schema and sends nothing back, so the client
waits forever; here such a request is answered with InvalidParams. Likewise a request after
`shutdown` gets InvalidRequest, a message that is not JSON-RPC 2.0 gets InvalidRequest when it has
an id to answer, a body that is not JSON gets ParseError, and a request for a method the server
does not implement gets MethodNotFound whatever its params. `$/cancelRequest` only
cancels a request's future in pygls, which does not stop a running agent turn; the server is told
about every cancellation so it can interrupt the turn behind the request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidParams,
    JsonRpcInvalidRequest,
    JsonRpcMethodNotFound,
    JsonRpcParseError,
)
from pygls.protocol import LanguageServerProtocol

log = logging.getLogger(__name__)


class _Answered:
    """Stands in for a request that was answered while parsing: pygls ignores it (not JSON-RPC 2.0)."""

    jsonrpc = "answered"


class TeachbackProtocol(LanguageServerProtocol):
    def __init__(self, server: Any, converter: Any) -> None:
        super().__init__(server, converter)
        self.cancel_listeners: list[Callable[[Any], None]] = []
        self.shutdown_requested = False

    def receive(self, data: Any) -> None:
        """Handle one parsed message from the editor, answering any request that cannot be served."""
        problem = envelope_problem(data)
        if problem is not None:
            self._refuse_invalid(data, problem)
            return
        method = data.get("method")
        if "id" in data and method is not None:
            if self.shutdown_requested and method != types.EXIT:
                self._refuse(
                    data["id"],
                    JsonRpcInvalidRequest(
                        f"{method}: the server has shut down; only the 'exit' notification is accepted now."
                    ),
                )
                return
            if not self._implements(method):
                self._refuse(
                    data["id"],
                    JsonRpcMethodNotFound(
                        f"{method}: teachback's language server does not implement this method; "
                        "its initialize result lists what it serves."
                    ),
                )
                return
            if method == types.SHUTDOWN:
                self.shutdown_requested = True
        self.handle_message(self.structure_message(data))

    def refuse_unparsable(self, reason: str) -> None:
        self._refuse(None, JsonRpcParseError(f"{reason}; send one JSON object per Content-Length frame."))

    def _refuse_invalid(self, data: Any, problem: str) -> None:
        if not isinstance(data, dict):
            self._refuse(None, JsonRpcInvalidRequest(problem))
        elif "method" not in data and ("result" in data or "error" in data):
            log.warning("dropped a response from the editor: %s", problem)  # answering it could loop
        elif _is_id(data.get("id")):
            self._refuse(data["id"], JsonRpcInvalidRequest(problem))
        else:
            log.warning("dropped a message with no id to answer: %s", problem)

    def _refuse(self, msg_id: Any, error: JsonRpcException) -> None:
        log.warning("answered message %r with error %s: %s", msg_id, error.code, error.message)
        # A plain dict: the converter would drop a null id, which JSON-RPC requires in this answer.
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": error.code, "message": error.message}})

    def _implements(self, method: str) -> bool:
        return method in self.fm.builtin_features or method in self.fm.features

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if "id" not in data or "method" not in data:
                raise
            method = data.get("method")
            error = JsonRpcInvalidParams(
                f"{method}: the params do not match the LSP schema for this method ({exc.message}); "
                "check the request against the specification."
            )
            log.warning("answered malformed %s request %r with InvalidParams", method, data["id"])
            self._send_response(data["id"], error=error.to_response_error())
            return _Answered()

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        super()._handle_cancel_notification(msg_id)
        for listener in list(self.cancel_listeners):
            listener(msg_id)


def envelope_problem(data: Any) -> str | None:
    """Why `data` is not a JSON-RPC 2.0 request, notification or response; None when it is one."""
    if not isinstance(data, dict):
        return "a message must be one JSON object (LSP has no batches); send each message in its own frame."
    if data.get("jsonrpc") != "2.0":
        return 'the message lacks "jsonrpc": "2.0"; every LSP message must carry it.'
    if "id" in data and not _is_id(data["id"]):
        return f'"id" must be an integer or a string, not {type(data["id"]).__name__}.'
    if "method" in data:
        return None if isinstance(data["method"], str) else '"method" must be a string.'
    if "id" not in data:
        return 'a notification needs a "method".'
    if "result" not in data and "error" not in data:
        return 'the message has an "id" but no "method" (a request) nor "result"/"error" (a response); add "method".'
    return None


def _is_id(value: Any) -> bool:
    return isinstance(value, (int, str)) and not isinstance(value, bool)
