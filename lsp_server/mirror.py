"""Bringing the editor in step with what the agent did on disk.

During a turn the agent writes to disk (so the commands it runs, such as tests, see its edits) and
keeps the overlay of open buffers in step. When the turn ends, its net change per file (content at
turn start -> content now) goes to the editor as one `workspace/applyEdit`:

- an open buffer gets a versioned `TextDocumentEdit` from its current text to the agent's version;
- a file the editor does not hold is handed over: the server puts its turn-start state back on
  disk and the edit carries the whole change (`TextDocumentEdit`, `CreateFile`, `RenameFile`,
  `DeleteFile`), so the editor performs it and one undo in the editor takes it back;
- when the editor refuses or fails, or cannot do a resource operation, the agent's version is
  (or stays) written on disk, and the user is told.

After a rejection or an undo (which the agent core performs on disk), `resync_open` edits the open
buffers that no longer match what the workspace holds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lsprotocol import types

from agent.workspace import FileChange, Workspace, WorkspaceError
from lsp_server.documents import Documents
from lsp_server.editor import Editor
from lsp_server.edits import inverse, is_empty, plan_mirror, text_edits, uri_for

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MirrorResult:
    applied: bool  # the editor took the edit (or there was nothing to send)
    sent: bool
    reason: str | None = None
    left_on_disk: tuple[str, ...] = ()


async def mirror_turn(
    changes: Sequence[FileChange], *, workspace: Workspace, documents: Documents, editor: Editor, label: str
) -> MirrorResult:
    support = editor.edit_support()
    held = documents.by_path()
    plan = plan_mirror(changes, root=workspace.root, open_documents=held, support=support)
    kept = tuple(c.path for c in plan.left_on_disk)
    if is_empty(plan.edit):
        return MirrorResult(applied=True, sent=False, left_on_disk=kept)
    restored = [c for c in plan.handed_over if not (c.kind in ("modify", "create") and c.path in held)]
    await asyncio.to_thread(_write_all, workspace, [inverse(c) for c in restored])
    applied, reason = await editor.apply_edit(label, plan.edit)
    if not applied:
        await asyncio.to_thread(_write_all, workspace, restored)
        editor.show(
            f"The editor did not apply teachback's changes ({reason or 'no reason given'}); they are saved on "
            "disk instead. Reload the files to see them, or run teachback.undo to take them back.",
            types.MessageType.Warning,
        )
    return MirrorResult(applied=applied, sent=True, reason=reason, left_on_disk=kept)


async def resync_open(
    paths: Iterable[str], *, workspace: Workspace, documents: Documents, editor: Editor, label: str
) -> bool:
    """Edit the open buffers among `paths` whose text differs from the workspace's; True if all applied."""
    support = editor.edit_support()
    held = documents.by_path()
    edits: list[types.TextDocumentEdit] = []
    plain: dict[str, list[types.TextEdit]] = {}
    for path in sorted(set(paths)):
        buffer = held.get(path)
        if buffer is None:
            continue
        try:
            target = await asyncio.to_thread(workspace.read_text, path)
        except WorkspaceError as exc:
            log.info("not resyncing %s: %s", path, exc)
            continue
        changes = text_edits(buffer.text, target, support.encoding)
        if not changes:
            continue
        uri = documents.uri_for_path(path) or uri_for(workspace.root, path)
        if support.document_changes:
            edits.append(
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=buffer.version),
                    edits=changes,
                )
            )
        else:
            plain[uri] = changes
    if not edits and not plain:
        return True
    edit = (
        types.WorkspaceEdit(document_changes=edits) if support.document_changes else types.WorkspaceEdit(changes=plain)
    )
    applied, reason = await editor.apply_edit(label, edit)
    if not applied:
        editor.show(
            f"The editor did not update its open buffers ({reason or 'no reason given'}); the files on disk are "
            "current: reload them.",
            types.MessageType.Warning,
        )
    return applied


def _write_all(workspace: Workspace, changes: Sequence[FileChange]) -> None:
    for change in changes:
        workspace.write(change)
