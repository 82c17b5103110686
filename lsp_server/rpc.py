"""pygls protocol additions: an answer for requests whose params do not parse, and a cancel hook.

Stock pygls 2.1 logs a request whose params fail its schema and sends nothing back, so the client
waits forever; here such a request is answered with InvalidParams. `$/cancelRequest` only
cancels a request's future in pygls, which does not stop a running agent turn; the server is told
about every cancellation so it can interrupt the turn behind the request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol

log = logging.getLogger(__name__)


class _Answered:
    """Stands in for a request that was answered while parsing: pygls ignores it (not JSON-RPC 2.0)."""

    jsonrpc = "answered"


class TeachbackProtocol(LanguageServerProtocol):
    def __init__(self, server: Any, converter: Any) -> None:
        super().__init__(server, converter)
        self.cancel_listeners: list[Callable[[Any], None]] = []

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
