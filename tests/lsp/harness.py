"""Drive the real server over stdio with pytest-lsp, through a small emulated editor.

The emulated editor keeps open buffers, answers `workspace/applyEdit` the way an editor does
(edits open buffers and sends didChange; edits, creates, renames and deletes other files on disk,
refusing a CreateFile over an existing file), answers `window/showMessageRequest` from a queue,
and collects `teachback/event` notifications.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import cattrs
from lsprotocol import types
from pygls.protocol import default_converter
from pygls.uris import from_fs_path, to_fs_path
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import register_lsp_features

from lsp_server.edits import position_at

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"


def offset_of(text: str, position: types.Position) -> int:
    """The character offset of a UTF-16 LSP position in `text`."""
    offset = 0
    for _ in range(position.line):
        breaks = [i for i in (text.find("\r\n", offset), text.find("\n", offset), text.find("\r", offset)) if i >= 0]
        first = min(breaks)
        offset = first + (2 if text.startswith("\r\n", first) else 1)
    units = 0
    while units < position.character and offset < len(text) and text[offset] not in "\r\n":
        units += 2 if ord(text[offset]) > 0xFFFF else 1
        offset += 1
    return offset


def apply_text_edits(text: str, edits: list[types.TextEdit]) -> str:
    spans = sorted(
        ((offset_of(text, e.range.start), offset_of(text, e.range.end), e.new_text) for e in edits), reverse=True
    )
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def _converter() -> cattrs.Converter:
    # lsprotocol 2025.0.0's client side reads a CodeAction that carries a command as a Command.
    converter = default_converter()

    def action_or_command(data: Any, _type: Any) -> Any:
        if isinstance(data.get("command"), str):
            return converter.structure(data, types.Command)
        return converter.structure(data, types.CodeAction)

    converter.register_structure_hook(types.CodeAction | types.Command, action_or_command)
    return converter


class FakeEditor:
    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.buffers: dict[str, list[Any]] = {}  # uri -> [version, text]
        self.applied: list[types.ApplyWorkspaceEditParams] = []
        self.answers: list[str | None] = []  # titles to answer showMessageRequest with, in order
        self.questions: list[types.ShowMessageRequestParams] = []
        self.events: list[dict[str, Any]] = []
        self.refuse_edits = False

    def open(self, path: Path, text: str | None = None, uri: str | None = None) -> str:
        uri = uri or from_fs_path(str(path))
        text = path.read_text() if text is None else text
        self.buffers[uri] = [1, text]
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
            )
        )
        return uri

    def type_text(self, uri: str, new_text: str) -> None:
        """Replace the buffer's text with one incremental change (as an editor's paste would)."""
        version, old = self.buffers[uri]
        end = position_at(old, len(old))
        self.buffers[uri] = [version + 1, new_text]
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version + 1),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(start=types.Position(line=0, character=0), end=end), text=new_text
                    )
                ],
            )
        )

    def save(self, uri: str) -> None:
        Path(to_fs_path(uri)).write_text(self.buffers[uri][1])
        self.client.text_document_did_save(
            types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    def text(self, uri: str) -> str:
        return self.buffers[uri][1]

    # -- requests from the server ------------------------------------------------------------

    def apply(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        self.applied.append(params)
        if self.refuse_edits:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason="the user refused")
        try:
            for change in params.edit.document_changes or []:
                self._apply_one(change)
            for uri, edits in (params.edit.changes or {}).items():
                self._apply_text(uri, None, edits)
        except (OSError, ValueError) as exc:
            return types.ApplyWorkspaceEditResult(applied=False, failure_reason=str(exc))
        return types.ApplyWorkspaceEditResult(applied=True)

    def _apply_one(self, change: Any) -> None:
        if isinstance(change, types.TextDocumentEdit):
            self._apply_text(change.text_document.uri, change.text_document.version, change.edits)
        elif isinstance(change, types.CreateFile):
            path = Path(to_fs_path(change.uri))
            if path.exists() and not (change.options and (change.options.overwrite or change.options.ignore_if_exists)):
                raise ValueError(f"CreateFile: {path} already exists")
            path.write_text("")
        elif isinstance(change, types.RenameFile):
            old, new = Path(to_fs_path(change.old_uri)), Path(to_fs_path(change.new_uri))
            if new.exists() and not (change.options and change.options.overwrite):
                raise ValueError(f"RenameFile: {new} already exists")
            old.rename(new)
        elif isinstance(change, types.DeleteFile):
            path = Path(to_fs_path(change.uri))
            if not path.exists() and not (change.options and change.options.ignore_if_not_exists):
                raise ValueError(f"DeleteFile: {path} does not exist")
            path.unlink(missing_ok=True)

    def _apply_text(self, uri: str, version: int | None, edits: list[types.TextEdit]) -> None:
        edits = [e for e in edits if isinstance(e, types.TextEdit)]
        if uri in self.buffers:
            current, text = self.buffers[uri]
            if version is not None and version != current:
                raise ValueError(f"{uri} is at version {current}, the edit is for {version}")
            self.type_text(uri, apply_text_edits(text, edits))
        else:  # a file the editor does not hold: apply and save it
            path = Path(to_fs_path(uri))
            path.write_text(apply_text_edits(path.read_text(), edits))

    def answer(self, params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
        self.questions.append(params)
        title = self.answers.pop(0) if self.answers else None
        return types.MessageActionItem(title=title) if title else None


def _plain(value: Any) -> Any:
    """Custom notifications arrive as namedtuples: back to dicts and lists."""
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def event_types(editor: FakeEditor) -> list[str]:
    return [e["type"] for e in editor.events]


async def wait_for(predicate: Any, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def lsp_session(
    root: Path,
    options: dict[str, Any] | None,
    *,
    capabilities: str = "visual-studio-code",
    timing: dict[str, float] | None = None,
    settle: float = 0.0,
) -> AsyncIterator[tuple[LanguageClient, FakeEditor]]:
    client = LanguageClient(converter_factory=_converter)
    register_lsp_features(client)
    editor = FakeEditor(client)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def on_apply(ls: LanguageClient, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        return editor.apply(params)

    @client.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
    def on_question(ls: LanguageClient, params: types.ShowMessageRequestParams) -> types.MessageActionItem | None:
        return editor.answer(params)

    @client.feature("teachback/event")
    def on_event(ls: LanguageClient, params: Any) -> None:
        editor.events.append(_plain(params))

    await client.start_io(sys.executable, "-m", "lsp_server", cwd=str(REPO), env=dict(os.environ))
    try:
        await asyncio.sleep(settle)
        started = time.perf_counter()
        await asyncio.wait_for(
            client.initialize_session(
                types.InitializeParams(
                    capabilities=client_capabilities(capabilities),
                    root_uri=from_fs_path(str(root)),
                    initialization_options=options,
                )
            ),
            timeout=30,
        )
        if timing is not None:
            timing["initialize"] = time.perf_counter() - started
        yield client, editor
    finally:
        await _stop(client)


async def _stop(client: LanguageClient) -> None:
    """Shut the server down politely; kill it if it does not go (a failed test must not hang)."""
    try:
        await asyncio.wait_for(client.shutdown_session(), timeout=20)
    except (TimeoutError, RuntimeError) as exc:
        sys.stderr.write(f"server did not shut down cleanly: {exc!r}\n")
    process = client._server  # pytest-lsp keeps the server process here
    if process is not None and process.returncode is None:
        process.kill()
    await asyncio.wait_for(client.stop(), timeout=20)


async def command(client: LanguageClient, name: str, *arguments: Any, timeout: float = 60) -> Any:
    return await asyncio.wait_for(
        client.workspace_execute_command_async(types.ExecuteCommandParams(command=name, arguments=list(arguments))),
        timeout=timeout,
    )


def scripted(name: str) -> str:
    """The model string for a script in tests/lsp/data."""
    return f"scripted/{DATA / name}"
