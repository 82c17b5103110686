"""Conversions between the agent's edit model (FileChange) and LSP's WorkspaceEdit.

A turn's changes reach the editor as one `workspace/applyEdit`. Text changes become `TextEdit`s
computed line by line (difflib), with positions in the negotiated encoding (UTF-16 unless the
client chose otherwise). Creations, renames and deletions become `CreateFile` / `RenameFile` /
`DeleteFile` when the client supports those resource operations; a change the client cannot take
is left out of the edit and stays as the agent wrote it on disk.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types
from pygls.uris import from_fs_path

from agent.workspace import FileChange

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class EditSupport:
    """What the client can apply, from its capabilities."""

    document_changes: bool = True
    resource_operations: frozenset[str] = frozenset({"create", "rename", "delete"})
    encoding: str = "utf-16"

    @classmethod
    def of(cls, capabilities: types.ClientCapabilities | None, encoding: str | None) -> EditSupport:
        edit = capabilities.workspace.workspace_edit if capabilities and capabilities.workspace else None
        operations = frozenset(str(op.value) for op in (edit.resource_operations or ())) if edit else frozenset()
        return cls(
            document_changes=bool(edit and edit.document_changes),
            resource_operations=operations,
            encoding=str(encoding or "utf-16"),
        )


@dataclass(frozen=True)
class OpenDocument:
    """An editor buffer: its version and the text the editor holds."""

    version: int
    text: str


@dataclass
class MirrorPlan:
    """One WorkspaceEdit for a turn, and which changes the editor is asked to perform."""

    edit: types.WorkspaceEdit
    handed_over: list[FileChange] = field(default_factory=list)  # the editor applies these
    left_on_disk: list[FileChange] = field(default_factory=list)  # the client cannot take these


# ---------------------------------------------------------------------------------------------
# text -> TextEdits


def position_at(text: str, offset: int, encoding: str = "utf-16") -> types.Position:
    """The LSP position of character `offset` in `text` (lines end at \\r\\n, \\r or \\n)."""
    line = 0
    line_start = 0
    for match in _LINE_BREAK.finditer(text, 0, offset):
        line += 1
        line_start = match.end()
    return types.Position(line=line, character=code_units(text[line_start:offset], encoding))


def code_units(chars: str, encoding: str = "utf-16") -> int:
    if encoding == "utf-8":
        return len(chars.encode("utf-8"))
    if encoding == "utf-32":
        return len(chars)
    return len(chars.encode("utf-16-le")) // 2


def text_edits(before: str, after: str, encoding: str = "utf-16") -> list[types.TextEdit]:
    """Line-granular edits that turn `before` into `after` (no edits when they are equal)."""
    if before == after:
        return []
    old_lines = before.splitlines(keepends=True)
    new_lines = after.splitlines(keepends=True)
    starts = [0]
    for line in old_lines:
        starts.append(starts[-1] + len(line))
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    edits = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        start, end = starts[i1], starts[i2]
        edits.append(
            types.TextEdit(
                range=types.Range(start=position_at(before, start, encoding), end=position_at(before, end, encoding)),
                new_text="".join(new_lines[j1:j2]),
            )
        )
    return edits


# ---------------------------------------------------------------------------------------------
# a turn's FileChanges -> one WorkspaceEdit


def uri_for(root: Path, rel_path: str) -> str:
    return from_fs_path(str(root / rel_path))


def plan_mirror(
    changes: Sequence[FileChange],
    *,
    root: Path,
    open_documents: Mapping[str, OpenDocument],
    support: EditSupport,
) -> MirrorPlan:
    """The WorkspaceEdit that makes the editor show `changes`.

    `open_documents` maps workspace-relative paths to the buffers the editor holds. An open
    buffer is edited from its current text at its current version; any other file is edited from
    the content the turn started with (the caller restores that on disk before sending).
    """
    plan = MirrorPlan(edit=types.WorkspaceEdit())
    document_changes: list = []
    plain_changes: dict[str, list[types.TextEdit]] = {}

    def add_text(rel_path: str, before: str, after: str) -> None:
        opened = open_documents.get(rel_path)
        edits = text_edits(opened.text if opened else before, after, support.encoding)
        uri = uri_for(root, rel_path)
        if support.document_changes:
            if edits:
                version = opened.version if opened else None
                document_changes.append(
                    types.TextDocumentEdit(
                        text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                        edits=edits,
                    )
                )
        elif edits:
            plain_changes[uri] = edits

    for change in changes:
        opened = open_documents.get(change.path)
        if change.kind in ("modify", "create") and opened is not None:
            add_text(change.path, opened.text, change.after or "")
            plan.handed_over.append(change)
        elif change.kind == "modify":
            add_text(change.path, change.before or "", change.after or "")
            plan.handed_over.append(change)
        elif not support.document_changes or _operation(change) not in support.resource_operations:
            plan.left_on_disk.append(change)
        elif change.kind == "create":
            document_changes.append(
                types.CreateFile(uri=uri_for(root, change.path), options=types.CreateFileOptions(overwrite=False))
            )
            if change.after:
                add_text(change.path, "", change.after)
            plan.handed_over.append(change)
        elif change.kind == "delete":
            document_changes.append(
                types.DeleteFile(
                    uri=uri_for(root, change.path), options=types.DeleteFileOptions(ignore_if_not_exists=True)
                )
            )
            plan.handed_over.append(change)
        else:  # move
            assert change.new_path is not None
            document_changes.append(
                types.RenameFile(
                    old_uri=uri_for(root, change.path),
                    new_uri=uri_for(root, change.new_path),
                    options=types.RenameFileOptions(overwrite=False),
                )
            )
            if change.after is not None and change.after != change.before:
                add_text(change.new_path, change.before or "", change.after)
            plan.handed_over.append(change)

    if support.document_changes:
        plan.edit.document_changes = document_changes
    else:
        plan.edit.changes = plain_changes
    return plan


def is_empty(edit: types.WorkspaceEdit) -> bool:
    return not edit.document_changes and not edit.changes


def inverse(change: FileChange) -> FileChange:
    """The change that undoes `change` (used to give the editor a file's turn-start state)."""
    if change.kind == "create":
        return FileChange(path=change.path, kind="delete", before=change.after, after=None)
    if change.kind == "delete":
        return FileChange(path=change.path, kind="create", before=None, after=change.before)
    if change.kind == "move":
        assert change.new_path is not None
        return FileChange(
            path=change.new_path, kind="move", before=change.after, after=change.before, new_path=change.path
        )
    return FileChange(path=change.path, kind="modify", before=change.after, after=change.before)


def _operation(change: FileChange) -> str:
    return {"create": "create", "delete": "delete", "move": "rename"}[change.kind]
