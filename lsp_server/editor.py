"""What the agent side needs from the editor, and its implementation over a pygls server.

Every request to the editor has a timeout: a client that never answers an `applyEdit` or a
`showMessageRequest` must not hang the agent.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Protocol

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer

from lsp_server.edits import EditSupport

log = logging.getLogger(__name__)

EVENT_NOTIFICATION = "teachback/event"
REQUEST_TIMEOUT = 60.0  # seconds the editor gets to apply an edit or create a progress token
QUESTION_TIMEOUT = 600.0  # seconds a person gets to answer an approval question


class Editor(Protocol):
    def edit_support(self) -> EditSupport: ...

    def send_event(self, data: dict[str, Any]) -> None: ...

    def log(self, text: str, level: types.MessageType = types.MessageType.Info) -> None: ...

    def show(self, text: str, level: types.MessageType = types.MessageType.Info) -> None: ...

    async def choose(self, text: str, choices: list[str]) -> str | None: ...

    async def apply_edit(self, label: str, edit: types.WorkspaceEdit) -> tuple[bool, str | None]: ...

    async def progress_begin(self, title: str, message: str) -> str | None: ...

    def progress_report(self, token: str | None, message: str, percentage: int | None = None) -> None: ...

    def progress_end(self, token: str | None, message: str) -> None: ...


class PyglsEditor:
    """The Editor seam over a running pygls LanguageServer."""

    def __init__(self, server: LanguageServer) -> None:
        self._server = server

    def edit_support(self) -> EditSupport:
        return EditSupport.of(self._server.client_capabilities, self._server.workspace.position_encoding)

    def send_event(self, data: dict[str, Any]) -> None:
        self._server.protocol.notify(EVENT_NOTIFICATION, data)

    def log(self, text: str, level: types.MessageType = types.MessageType.Info) -> None:
        self._server.window_log_message(types.LogMessageParams(type=level, message=text))

    def show(self, text: str, level: types.MessageType = types.MessageType.Info) -> None:
        self._server.window_show_message(types.ShowMessageParams(type=level, message=text))

    async def choose(self, text: str, choices: list[str]) -> str | None:
        params = types.ShowMessageRequestParams(
            type=types.MessageType.Info, message=text, actions=[types.MessageActionItem(title=c) for c in choices]
        )
        try:
            answer = await asyncio.wait_for(self._server.window_show_message_request_async(params), QUESTION_TIMEOUT)
        except (TimeoutError, JsonRpcException) as exc:
            log.info("no answer to %r: %s", text, exc)
            return None
        return answer.title if answer is not None else None

    async def apply_edit(self, label: str, edit: types.WorkspaceEdit) -> tuple[bool, str | None]:
        params = types.ApplyWorkspaceEditParams(edit=edit, label=label)
        try:
            result = await asyncio.wait_for(self._server.workspace_apply_edit_async(params), REQUEST_TIMEOUT)
        except TimeoutError:
            return False, f"no answer to workspace/applyEdit within {REQUEST_TIMEOUT:g} s"
        except JsonRpcException as exc:
            return False, f"workspace/applyEdit failed: {exc.message}"
        if result is None:
            return False, "the editor sent no result for workspace/applyEdit"
        return bool(result.applied), result.failure_reason

    async def progress_begin(self, title: str, message: str) -> str | None:
        window = self._server.client_capabilities.window
        if not (window and window.work_done_progress):
            return None
        token = f"teachback-{uuid.uuid4().hex[:12]}"
        try:
            await asyncio.wait_for(self._server.work_done_progress.create_async(token), REQUEST_TIMEOUT)
        except (TimeoutError, JsonRpcException) as exc:
            log.info("the editor refused a progress token: %s", exc)
            return None
        self._server.work_done_progress.begin(
            token, types.WorkDoneProgressBegin(title=title, message=message, cancellable=True, percentage=0)
        )
        return token

    def progress_report(self, token: str | None, message: str, percentage: int | None = None) -> None:
        if token is not None:
            self._server.work_done_progress.report(
                token, types.WorkDoneProgressReport(message=message, percentage=percentage, cancellable=True)
            )

    def progress_end(self, token: str | None, message: str) -> None:
        if token is not None:
            self._server.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
            self._server.work_done_progress.tokens.pop(token, None)
