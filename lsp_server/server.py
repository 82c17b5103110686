"""The teachback language server: one module-level pygls server, one short function per handler.

`initialize` only reads settings (the agent, litellm and the feedback store load later, off that
path); `initialized` starts the agent's worker process, which warms those imports up, so the first
turn starts sooner (see lsp_server.worker).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from lsp_server import actions, commands, transport
from lsp_server.documents import Documents
from lsp_server.editor import PyglsEditor
from lsp_server.host import AgentHost
from lsp_server.options import effective_options, resolve_options
from lsp_server.rpc import TeachbackProtocol

log = logging.getLogger(__name__)

VERSION = "0.1.0"
CODE_ACTION_KINDS = [
    types.CodeActionKind.QuickFix,
    types.CodeActionKind.RefactorRewrite,
    types.CodeActionKind.Source,
    types.CodeActionKind.Empty,
]


@dataclass
class Startup:
    initialize_ms: float
    litellm_loaded: bool  # whether litellm was already imported when initialize answered


class TeachbackServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "teachback",
            VERSION,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=TeachbackProtocol,
        )
        self.host: AgentHost | None = None
        self.documents: Documents | None = None
        self.startup: Startup | None = None
        self.protocol.cancel_listeners.append(self._on_cancel)

    def start_workspace(self, root: Path, raw_options: Any) -> list[str]:
        resolved = resolve_options(raw_options, root)
        self.documents = Documents(root)
        self.host = AgentHost(root, resolved.options, self.documents, PyglsEditor(self))
        return list(resolved.problems)

    def require_host(self) -> AgentHost:
        if self.host is None:
            raise commands.RequestFailed("the server is not initialized yet; send initialize first.")
        return self.host

    def _on_cancel(self, request_id: Any) -> None:
        if self.host is not None:
            self.host.cancel_request(request_id)


server = TeachbackServer()


# -- lifecycle ----------------------------------------------------------------------------------


@server.feature(types.INITIALIZE)
def initialize(ls: TeachbackServer, params: types.InitializeParams) -> None:
    clock = time.perf_counter()
    root = workspace_root(params)
    for problem in ls.start_workspace(root, params.initialization_options):
        ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=f"teachback: {problem}"))
    ls.startup = Startup((time.perf_counter() - clock) * 1000, "litellm" in sys.modules)


@server.feature(types.INITIALIZED)
def initialized(ls: TeachbackServer, params: types.InitializedParams) -> None:
    if ls.host is not None:
        ls.host.warm_up()


@server.feature(types.SHUTDOWN)
async def shutdown(ls: TeachbackServer, params: None) -> None:
    if ls.host is not None:
        await ls.host.close()


def workspace_root(params: types.InitializeParams) -> Path:
    for uri in [params.root_uri, *(f.uri for f in params.workspace_folders or [])]:
        path = to_fs_path(uri) if uri else None
        if path and Path(path).is_dir():
            return Path(path)
    if params.root_path and Path(params.root_path).is_dir():
        return Path(params.root_path)
    return Path(os.getcwd())


# -- documents ----------------------------------------------------------------------------------


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: TeachbackServer, params: types.DidOpenTextDocumentParams) -> None:
    doc = params.text_document
    if ls.documents is not None:
        ref = ls.documents.opened(doc.uri, doc.text, doc.version)
        if ls.host is not None and ref.path is not None:
            ls.host.disk.saw(ref.path)  # opened during a turn: the editor read the agent's version


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: TeachbackServer, params: types.DidChangeTextDocumentParams) -> None:
    # Synchronous on purpose: the text read here is exactly the text at this change's version.
    if ls.documents is None or ls.host is None:
        return
    doc = ls.workspace.get_text_document(params.text_document.uri)  # pygls applied the changes
    ref = ls.documents.changed(doc.uri, doc.source, params.text_document.version)
    ls.host.document_changed(ref.path, doc.source)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
async def did_save(ls: TeachbackServer, params: types.DidSaveTextDocumentParams) -> None:
    if ls.documents is not None and ls.host is not None:
        path = ls.documents.ref(params.text_document.uri).path
        if path is not None:
            ls.host.disk.saw(path)
            await ls.host.flush_corrections(path)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
async def did_close(ls: TeachbackServer, params: types.DidCloseTextDocumentParams) -> None:
    if ls.documents is None or ls.host is None:
        return
    path = ls.documents.ref(params.text_document.uri).path
    if path is not None:
        await ls.host.flush_corrections(path)
        ls.host.disk.saw(path)  # closed unsaved: the agent's change in it is gone with the buffer
    ls.documents.closed(params.text_document.uri)


# -- code actions ---------------------------------------------------------------------------------


@server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(code_action_kinds=CODE_ACTION_KINDS))
def code_action(ls: TeachbackServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    if ls.documents is None:
        return []
    ref = ls.documents.ref(params.text_document.uri)
    label = ref.path or params.text_document.uri
    return actions.code_actions(
        params.text_document.uri, label, params.range, params.context.diagnostics, params.context.only
    )


@server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
def progress_cancelled(ls: TeachbackServer, params: types.WorkDoneProgressCancelParams) -> None:
    if ls.host is not None:
        ls.host.cancel_progress(params.token)


# -- commands -------------------------------------------------------------------------------------


@server.command(commands.ASK)
async def ask(ls: TeachbackServer, *args: Any) -> dict[str, Any]:
    request = commands.parse_ask(args)
    return await ls.require_host().ask(request, ls.protocol.msg_id)


@server.command(commands.ACCEPT)
async def accept(ls: TeachbackServer, *args: Any) -> dict[str, Any]:
    request = commands.parse_review(commands.ACCEPT, args)
    return await ls.require_host().review(request.id, True, request.reason)


@server.command(commands.REJECT)
async def reject(ls: TeachbackServer, *args: Any) -> dict[str, Any]:
    request = commands.parse_review(commands.REJECT, args)
    return await ls.require_host().review(request.id, False, request.reason)


@server.command(commands.UNDO)
async def undo(ls: TeachbackServer, *args: Any) -> dict[str, Any]:
    commands.parse_no_arguments(commands.UNDO, args)
    return await ls.require_host().undo()


@server.command(commands.CANCEL)
def cancel(ls: TeachbackServer, *args: Any) -> dict[str, Any]:
    commands.parse_no_arguments(commands.CANCEL, args)
    return {"cancelled": ls.require_host().cancel()}


@server.command(commands.STATUS)
def status(ls: TeachbackServer, *args: Any) -> dict[str, Any]:
    commands.parse_no_arguments(commands.STATUS, args)
    host = ls.require_host()
    startup = ls.startup
    return {
        **host.status(),
        "workspace": str(host.root),
        "options": effective_options(host.options),
        "startup": {
            "initializeMs": startup.initialize_ms if startup else None,
            "litellmLoadedAtInitialize": startup.litellm_loaded if startup else None,
        },
    }


# -- entry point ----------------------------------------------------------------------------------


def main(tcp: str | None = None) -> int:
    """Serve on stdio, or on TCP when `tcp` is "HOST:PORT". Returns the exit status."""
    logging.basicConfig(
        stream=sys.stderr,
        level=os.environ.get("TEACHBACK_LOG_LEVEL", "WARNING").upper(),
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    if tcp is not None:
        host, sep, port = tcp.rpartition(":")
        if not sep or not port.isdigit():
            sys.stderr.write(f"teachback lsp: --tcp takes HOST:PORT (e.g. 127.0.0.1:2087), got {tcp!r}\n")
            return 2
        return transport.serve_tcp(server, host or "127.0.0.1", int(port))
    stdout = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print from any library must not corrupt the protocol stream
    return transport.serve_stdio(server, sys.stdin.buffer, stdout)
