"""Bringing the editor in step with what the agent did on disk.

During a turn the agent writes to disk (so the commands it runs, such as tests, see its edits) and
keeps the overlay of open buffers in step. When the turn ends, its net change per file (content at
turn start -> content now) goes to the editor as one `workspace/applyEdit`:

- an open buffer gets a versioned `TextDocumentEdit` from its current text to the agent's version,
  and its file is first put back as the editor last saw it, bytes and times (see
  lsp_server.disk_view): a buffer whose file changed under it makes editors ask before they edit
  or save it, so the buffer is the one place the change arrives, as after a rename refactoring;
- a file the editor does not hold is handed over: the server puts its turn-start state back on
  disk and the edit carries the whole change (`TextDocumentEdit`, `CreateFile`, `RenameFile`,
  `DeleteFile`), so the editor performs it and one undo in the editor takes it back;
- when the editor refuses or fails, or cannot do a resource operation, the agent's version is
  (or stays) written on disk, and the user is told.

After a rejection or an undo (which the agent core performs on disk), `resync_open` edits the open
buffers that no longer match what the workspace holds, putting their files back the same way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from lsprotocol import types

from agent.workspace import FileChange, Workspace, WorkspaceError
from lsp_server.disk_view import DiskState, DiskView
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
    changes: Sequence[FileChange],
    *,
    workspace: Workspace,
    documents: Documents,
    disk: DiskView,
    editor: Editor,
    label: str,
) -> MirrorResult:
    support = editor.edit_support()
    held = documents.by_path()
    plan = plan_mirror(changes, root=workspace.root, open_documents=held, support=support)
    kept = tuple(c.path for c in plan.left_on_disk)
    buffered = {c.path for c in plan.handed_over if c.kind in ("modify", "create") and c.path in held}
    texts_after = {c.path: c.after for c in plan.handed_over if c.path in buffered}
    replaced = await asyncio.to_thread(disk.settle, sorted(buffered), {p: held[p].text for p in buffered})
    if is_empty(plan.edit):
        return MirrorResult(applied=True, sent=False, left_on_disk=kept)
    restored = [c for c in plan.handed_over if c.path not in buffered]
    await asyncio.to_thread(_write_all, workspace, [inverse(c) for c in restored])
    applied, reason = await editor.apply_edit(label, plan.edit)
    if applied:
        disk.unsaved.update(p for p in buffered if held[p].text != texts_after.get(p))
    else:
        await asyncio.to_thread(_write_all, workspace, restored)
        await asyncio.to_thread(_put_all, disk, replaced)
        editor.show(
            f"The editor did not apply teachback's changes ({reason or 'no reason given'}); they are saved on "
            "disk instead. Reload the files to see them, or run teachback.undo to take them back.",
            types.MessageType.Warning,
        )
    return MirrorResult(applied=applied, sent=True, reason=reason, left_on_disk=kept)


async def resync_open(
    paths: Iterable[str], *, workspace: Workspace, documents: Documents, disk: DiskView, editor: Editor, label: str
) -> bool:
    """Edit the open buffers among `paths` whose text differs from the file on disk (the agent core
    wrote it: an undo, a rejection, a stopped turn); True if all applied."""
    support = editor.edit_support()
    held = documents.by_path()
    wanted = sorted(set(paths) & set(held))
    edits: list[types.TextDocumentEdit] = []
    plain: dict[str, list[types.TextEdit]] = {}
    for path in wanted:
        buffer = held[path]
        try:
            target = await asyncio.to_thread(disk.text, path)
        except WorkspaceError as exc:
            log.info("not resyncing %s: %s", path, exc)
            continue
        if target is None:
            continue  # deleted: the buffer stays, for the user to keep or kill
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
    replaced = await asyncio.to_thread(disk.settle, wanted, {p: held[p].text for p in wanted})
    if not edits and not plain:
        return True
    edit = (
        types.WorkspaceEdit(document_changes=edits) if support.document_changes else types.WorkspaceEdit(changes=plain)
    )
    applied, reason = await editor.apply_edit(label, edit)
    if not applied:
        await asyncio.to_thread(_put_all, disk, replaced)
        editor.show(
            f"The editor did not update its open buffers ({reason or 'no reason given'}); the files on disk are "
            "current: reload them.",
            types.MessageType.Warning,
        )
    return applied


def _write_all(workspace: Workspace, changes: Sequence[FileChange]) -> None:
    for change in changes:
        workspace.write(change)


def _put_all(disk: DiskView, states: dict[str, DiskState]) -> None:
    for path, state in states.items():
        disk.put(path, state)
