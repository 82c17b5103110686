"""The workspace: confinement to the project root, the overlay of unsaved buffers, and writes.

Every path a tool names is resolved (symlinks included) and must stay inside the root. Reads see
the overlay (the editor's unsaved buffers) before the disk. Writes go to disk and keep the overlay
in step, so commands the agent runs see its edits and the editor can mirror them. No `.git`
folder at any depth is written, nor a file with other hard links (it may live outside too), and
the write itself never follows a link (see `agent.safe_write`).

An editor that serves its files itself (the Agent Client Protocol's fs/* methods) is attached as
`EditorFiles`: reads ask it first (its unsaved buffers), and whole-file writes go through it (its
buffers and undo stay right); the paths are checked here first, exactly as for the disk.
"""

from __future__ import annotations

import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal, Protocol

from agent.safe_write import (
    PathChanged,
    SafeWriteError,
    is_git_dir_name,
    is_inside,
    real_path,
    unlink_inside,
    write_inside,
)

MAX_READ_BYTES = 2_000_000  # larger files are refused whole; read_file pages through lines instead
MAX_PATH_BYTES = 4096  # PATH_MAX on Linux
MAX_NAME_BYTES = 255  # NAME_MAX: one file or folder name


class WorkspaceError(Exception):
    """A path or file the agent may not use; `kind` is a protocol ErrorKind."""

    def __init__(self, message: str, kind: str = "failed") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class FileChange:
    """One file's change: what was there before (None: absent) and what is there after."""

    path: str  # workspace-relative, posix separators
    kind: Literal["create", "modify", "delete", "move"]
    before: str | None
    after: str | None
    new_path: str | None = None  # for moves


def _length_problem(path: str) -> str | None:
    """Why the OS would refuse `path` for its length (it fails there with ENAMETOOLONG), if it would."""
    size = len(path.encode("utf-8", "surrogatepass"))
    if size > MAX_PATH_BYTES:
        return f"the path is {size:,} bytes long, over the {MAX_PATH_BYTES:,}-byte limit for a path"
    name_sizes = [(len(name.encode("utf-8", "surrogatepass")), name) for name in path.split("/")]
    size, name = max(name_sizes)
    if size > MAX_NAME_BYTES:
        return (
            f"the name {name[:40]!r}... is {size:,} bytes long, over the {MAX_NAME_BYTES}-byte limit for "
            "one file or folder name"
        )
    return None


def _not_a_file(path: Path, rel: str) -> WorkspaceError:
    """Why `path`, neither a folder nor a regular file, cannot be read: it is absent or a special file
    (which is never opened: opening a named pipe blocks until something writes to it)."""
    special = (
        (Path.is_fifo, "a named pipe (FIFO)"),
        (Path.is_socket, "a socket"),
        (Path.is_char_device, "a character device"),
        (Path.is_block_device, "a block device"),
    )
    for is_kind, kind in special:
        if is_kind(path):
            return WorkspaceError(
                f"{rel} is {kind}, not a regular file; teachback reads and edits regular files only. Leave it "
                "alone, or find the file you meant with list_files.",
                "failed",
            )
    return WorkspaceError(f"{rel} does not exist. Use list_files or search to find the right path.", "not_found")


class EditorFiles(Protocol):
    """An editor's own file system. `read`: the file's text as the editor has it, or None to let the
    disk answer. `write`: True once the editor has written `text` (to its buffer and the disk),
    False to have the workspace write the disk itself."""

    def read(self, path: Path) -> str | None: ...

    def write(self, path: Path, text: str) -> bool: ...


class Overlay:
    """Unsaved editor buffers laid over the disk, keyed by absolute path, with versions."""

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace
        self._buffers: dict[Path, tuple[str, int | None]] = {}
        self._lock = threading.Lock()

    def set(self, path: str | Path, text: str, version: int | None = None) -> None:
        key = self._workspace.resolve(str(path))
        with self._lock:
            self._buffers[key] = (text, version)

    def remove(self, path: str | Path) -> None:
        key = self._workspace.resolve(str(path))
        with self._lock:
            self._buffers.pop(key, None)

    def get(self, path: Path) -> tuple[str, int | None] | None:
        with self._lock:
            return self._buffers.get(path)

    def replace_text(self, path: Path, text: str) -> None:
        """Keep an open buffer in step with a write (its version is the editor's to bump)."""
        with self._lock:
            if path in self._buffers:
                self._buffers[path] = (text, self._buffers[path][1])

    def paths(self) -> list[Path]:
        with self._lock:
            return sorted(self._buffers)


class Workspace:
    def __init__(self, root: str | Path) -> None:
        root_path = Path(root).expanduser()
        if not root_path.is_dir():
            raise WorkspaceError(f"workspace {root_path} is not a directory; pass --workspace DIR.")
        self.root = root_path.resolve()
        self.overlay = Overlay(self)
        self._editor: EditorFiles | None = None

    def attach_editor(self, editor: EditorFiles) -> None:
        """Read and write through `editor` from now on (see EditorFiles)."""
        self._editor = editor

    # -- paths --------------------------------------------------------------------------------

    def resolve(self, path: str) -> Path:
        """The absolute, symlink-resolved path for `path`, refused when it leaves the workspace."""
        if not isinstance(path, str) or not path.strip():
            raise WorkspaceError("path must be a non-empty string relative to the workspace root.", "bad_arguments")
        if "\x00" in path:
            raise WorkspaceError("path contains a NUL byte; send a plain relative path.", "outside_workspace")
        if not path.isascii() and not _file_name(path):
            raise WorkspaceError(
                "path holds a character that is not valid Unicode text (a lone surrogate); send the path without it.",
                "bad_arguments",
            )
        too_long = _length_problem(path)
        if too_long:
            raise WorkspaceError(
                f"{too_long}. Send a shorter path relative to the workspace root; list_files shows the real names.",
                "bad_arguments",
            )
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        try:
            resolved = Path(real_path(candidate))
        except PathChanged as exc:
            raise WorkspaceError(
                f"{exc} Send the call again once the folder stays put; a path whose folders are links "
                "that lead out of the workspace is refused.",
                "outside_workspace",
            ) from None
        if not is_inside(self.root, resolved):
            hint = self._inside_twin(Path(path))
            raise WorkspaceError(
                # "the workspace", never its folder: this text is feedback that is recorded and exported.
                f"{path!r} is outside the workspace. Use a path relative to the workspace "
                "root, without '..' and without symlinks that lead out of it."
                + (f" Did you mean {hint!r}?" if hint else ""),
                "outside_workspace",
            )
        return resolved

    def _inside_twin(self, path: Path) -> str | None:
        """The longest tail of `path` that names an existing file or folder in the workspace."""
        parts = [p for p in path.parts if p not in ("/", "..", ".")]
        for start in range(len(parts)):
            candidate = self.root.joinpath(*parts[start:])
            if candidate.exists() and is_inside(self.root, candidate):
                return Path(*parts[start:]).as_posix()
        return None

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path != self.root else "."

    def resolve_writable(self, path: str) -> Path:
        """`resolve`, and refused when no tool may write there: a `.git` folder at any depth, or a
        file with more than one hard link."""
        resolved = self.resolve(path)
        if resolved == self.root:
            raise WorkspaceError("the workspace root itself cannot be written; name a file inside it.", "bad_arguments")
        rel = self.relative(resolved)
        parts = rel.split("/")
        git_dir = next((i for i, part in enumerate(parts) if is_git_dir_name(part)), None)
        if git_dir is not None:
            raise WorkspaceError(
                f"{path!r} is inside the git folder {'/'.join(parts[: git_dir + 1])}/, which tools never write "
                "(git runs hooks and reads settings from there). Change the project's files instead.",
                "outside_workspace",
            )
        try:
            info = os.lstat(resolved)
        except (FileNotFoundError, NotADirectoryError):  # a new file (or a path the write will refuse)
            return resolved
        if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
            raise WorkspaceError(
                f"{rel} has {info.st_nlink} hard links: the same file is reachable under another name, "
                "possibly outside the workspace, so tools only read it. To change this copy alone, detach it "
                f"first with run_command: cp -p {rel} {rel}.copy && mv {rel}.copy {rel}",
                "outside_workspace",
            )
        return resolved

    # -- reading ------------------------------------------------------------------------------

    def exists(self, path: Path) -> bool:
        return self.overlay.get(path) is not None or path.exists()

    def read_text(self, path: str | Path, *, limit: int = MAX_READ_BYTES) -> str:
        """The text the user sees: the open buffer if any, else the file on disk (UTF-8)."""
        resolved = self.resolve(str(path))  # a Path from a listing is checked too (links out are refused)
        buffered = self.overlay.get(resolved)
        if buffered is not None:
            return buffered[0]
        rel = self.relative(resolved)
        if self._editor is not None and (resolved.is_file() or not resolved.exists()):
            text = self._editor.read(resolved)
            if text is not None and len(text) <= limit:  # longer: paged from the disk by the caller
                return text
        if resolved.is_dir():
            raise WorkspaceError(f"{rel} is a directory; use list_files to see what it holds.", "failed")
        if not resolved.is_file():
            raise _not_a_file(resolved, rel)
        try:
            size = resolved.stat().st_size
            if size > limit:
                raise WorkspaceError(
                    f"{rel} is {size:,} bytes, over the {limit:,}-byte limit for reading whole; read a line "
                    "range with read_file(path, start_line, end_line) or search it.",
                    "too_large",
                )
            with self.open_inside(resolved) as handle:
                data = handle.read()
        except OSError as exc:  # checked a moment ago: it was moved, or a folder on the way replaced, since
            raise WorkspaceError(
                f"{rel} could not be read ({exc.strerror or exc}): it changed while it was being read. "
                "Check it with list_files, then send the call again.",
                "not_found" if isinstance(exc, FileNotFoundError) else "failed",
            ) from None
        return decode_text(data, rel)

    def open_inside(self, resolved: Path) -> BinaryIO:
        """`resolved` opened for reading, checked again on the open file itself: a folder on the way
        swapped for a link to outside after `resolve` checked it would otherwise be followed. The last
        part is never followed (O_NOFOLLOW); where the system names an open file's path (/proc), that
        path must still lie in the workspace."""
        fd = os.open(resolved, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        handle = os.fdopen(fd, "rb")
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(f"{self.relative(resolved)} is no longer a regular file")
            where = Path(f"/proc/self/fd/{fd}")
            if where.is_symlink():
                real = Path(os.readlink(where))
                if real != self.root and self.root not in real.parents:
                    raise WorkspaceError(
                        f"{self.relative(resolved)} led outside the workspace while it was being read "
                        "(a folder on its way was replaced by a link); nothing outside was read.",
                        "outside_workspace",
                    )
        except BaseException:
            handle.close()
            raise
        return handle

    # -- writing ------------------------------------------------------------------------------

    def write(self, change: FileChange) -> None:
        """Apply one change to disk (and to an open buffer), never through a link."""
        source = self.resolve_writable(change.path)
        rel = self.relative(source)
        try:
            if change.kind == "delete":
                unlink_inside(self.root, rel)
                self.overlay.remove(source)
                return
            assert change.after is not None
            data = _encoded(change.after, change.new_path or change.path)
            if change.kind == "move":
                assert change.new_path is not None
                target = self.resolve_writable(change.new_path)
                write_inside(self.root, self.relative(target), data, mode=stat.S_IMODE(os.lstat(source).st_mode))
                unlink_inside(self.root, rel)
                self.overlay.remove(source)
                return
            if self._editor is None or not self._editor.write(source, change.after):
                write_inside(self.root, rel, data)
        except SafeWriteError as exc:
            raise WorkspaceError(str(exc), "outside_workspace") from None
        self.overlay.replace_text(source, change.after)


def decode_text(data: bytes, rel: str) -> str:
    if b"\x00" in data[:8192]:
        raise WorkspaceError(
            f"{rel} is a binary file ({len(data):,} bytes); teachback reads text files only.", "binary"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorkspaceError(
            f"{rel} is not UTF-8 text (invalid byte at offset {exc.start}); it cannot be read or edited "
            "as text. Convert it to UTF-8 first, or leave it alone.",
            "encoding",
        ) from None


def _file_name(path: str) -> bool:
    """Whether `path` can name a file: the surrogates that stand for undecodable bytes of a name read
    from disk can; any other lone surrogate cannot."""
    try:
        os.fsencode(path)
    except UnicodeEncodeError:
        return False
    return True


def _encoded(text: str, rel: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise WorkspaceError(
            f"the new text for {rel} holds {text[exc.start : exc.end]!r} at character {exc.start}, which is not "
            "valid Unicode text (a lone surrogate); nothing was written. Send the text without it.",
            "encoding",
        ) from None
