"""Writes that cannot be redirected out of a folder, and the checks that say what is inside it.

A path that was checked and then written can be changed in between: a planted link named like the
temporary file, or a folder swapped for a link. So a write never opens a path by name from the
top: it walks from the root's file descriptor one folder at a time with O_NOFOLLOW (a link where
a folder should be fails), creates a randomly named temporary file with O_CREAT|O_EXCL|O_NOFOLLOW
in the folder it holds open, checks again that this folder is still the one reached from the root,
and renames the temporary file over the target inside that same folder.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# Code points HFS+ ignores in names, so ".g\\u200cit" is ".git" there (git's own check skips them too).
_HFS_IGNORED = dict.fromkeys(
    map(ord, "\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u206a\u206b\u206c\u206d\u206e\u206f\ufeff")
)


class SafeWriteError(Exception):
    """The path changed under the write (a link appeared), so nothing was written."""


class PathChanged(SafeWriteError):
    """A path kept changing while its links were being followed (a folder swapped for a link and
    back), so where it leads is not known."""


RESOLVE_TRIES = 3  # a swap caught half-way is usually over by the next try


def real_path(path: str | Path) -> str:
    """`os.path.realpath`, which raises when a link it is following is replaced mid-way (a link that
    `lstat` saw is a folder by the time it is read: EINVAL). Tried again a few times; then PathChanged."""
    for _ in range(RESOLVE_TRIES - 1):
        try:
            return os.path.realpath(path)
        except OSError:
            continue
    try:
        return os.path.realpath(path)
    except OSError as exc:
        raise PathChanged(
            f"{os.fspath(path)!r} kept changing while it was checked (a folder on the way was replaced by a link, "
            f"or back: {exc.strerror}), so nothing was done with it."
        ) from None


def is_git_dir_name(name: str) -> bool:
    """Whether a path component names a git folder on some filesystem: `.git` in any case
    (case-insensitive filesystems), with HFS+'s ignored code points, with NTFS's trailing dots and
    spaces, with an NTFS stream suffix (`.git::$INDEX_ALLOCATION`, `.git:x`: what follows a colon
    names a stream of the folder), as NTFS's short name `git~1`, or as a folder of a Windows path
    (`a\\.git`: a backslash separates folders there)."""
    for piece in name.split("\\"):
        stem = piece.split(":", 1)[0]
        if stem.translate(_HFS_IGNORED).rstrip(". ").casefold() in (".git", "git~1"):
            return True
    return False


def is_inside(root: Path, path: str | Path) -> bool:
    """Whether `path`, with every link followed, is `root` or below it (`root` already resolved).
    A path whose links keep changing is not known to be inside, so it is not."""
    try:
        real = real_path(path)
    except PathChanged:
        return False
    base = str(root).rstrip(os.sep)
    return real == str(root) or real.startswith(base + os.sep)


def paths_inside(root: Path, rels: Iterable[str]) -> list[str]:
    """The root-relative paths of `rels` that resolve inside `root`: links leading out (to a file
    or through a folder) are dropped. Each folder is read once (its entries' types come with the
    listing), so only the links themselves are resolved."""
    root = Path(real_path(root))
    folders = _Folders(root)
    kept = []
    for rel in rels:
        folder, _, name = rel.rpartition("/")
        real = folders.real(folder)
        if real is not None and (not folders.is_link(folder, name) or is_inside(root, os.path.join(real, name))):
            kept.append(rel)
    return kept


class _Folders:
    """Each folder's real path (None: it leads out of the root) and the names of the links in it."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._real: dict[str, str | None] = {"": str(root)}
        self._links: dict[str, frozenset[str] | None] = {}  # None: the folder could not be listed

    def real(self, folder: str) -> str | None:
        if folder not in self._real:
            parent, _, name = folder.rpartition("/")
            base = self.real(parent)
            if base is None:
                self._real[folder] = None
            elif self.is_link(parent, name):
                try:
                    target: str | None = real_path(os.path.join(base, name))
                except PathChanged:  # where it leads is not known: treated as leading out
                    target = None
                self._real[folder] = target if target is not None and is_inside(self._root, target) else None
            else:
                self._real[folder] = os.path.join(base, name)
        return self._real[folder]

    def is_link(self, folder: str, name: str) -> bool:
        """Whether `name` in `folder` (whose real path is known) is a link."""
        real = self._real[folder]
        assert real is not None
        if folder not in self._links:
            try:
                with os.scandir(real) as entries:
                    self._links[folder] = frozenset(e.name for e in entries if e.is_symlink())
            except OSError:  # not listable (no read permission): ask about each name instead
                self._links[folder] = None
        links = self._links[folder]
        return name in links if links is not None else os.path.islink(os.path.join(real, name))


def write_inside(root: Path, rel: str, data: bytes, *, mode: int | None = None) -> None:
    """Write `data` to `root/rel` atomically, creating missing folders, without following links.

    `mode` sets the permission bits; None keeps those of the file replaced (new files: 0o666 less
    the umask). A link at `rel` itself is replaced, never followed."""
    with _parent(root, rel, create=True) as (parent, name):
        if mode is None:
            with contextlib.suppress(FileNotFoundError):
                mode = stat.S_IMODE(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
        tmp = f".teachback-{secrets.token_hex(8)}.tmp"
        fd = os.open(tmp, _NEW_FILE_FLAGS, 0o666, dir_fd=parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                if mode is not None:
                    os.fchmod(handle.fileno(), mode)
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            _check_still_reached(root, rel, parent)
            os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=parent)
            raise


def symlink_inside(root: Path, rel: str, target: str) -> None:
    """Make `root/rel` a link to `target` (what undo restores for a link), replacing a file there."""
    with _parent(root, rel, create=True) as (parent, name):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=parent)
        os.symlink(target, name, dir_fd=parent)


def unlink_inside(root: Path, rel: str) -> None:
    """Remove the file `root/rel` (a link itself, never its target); absent already is fine."""
    try:
        with _parent(root, rel, create=False) as (parent, name):
            os.unlink(name, dir_fd=parent)
    except FileNotFoundError:
        return


@contextlib.contextmanager
def _parent(root: Path, rel: str, *, create: bool) -> Iterator[tuple[int, str]]:
    """A descriptor of `rel`'s folder, reached from `root` without following any link, and the
    last component of `rel`."""
    *folders, name = _parts(rel)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for folder in folders:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(folder, dir_fd=fd)
            child = _open_folder(folder, fd, rel)
            os.close(fd)
            fd = child
        yield fd, name
    finally:
        os.close(fd)


def _open_folder(folder: str, parent: int, rel: str) -> int:
    try:
        return os.open(folder, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(folder, parent):
            raise SafeWriteError(
                f"{folder!r} on the way to {rel} is a link, not a folder (it may have changed since the path "
                "was checked); nothing was written. Use a path whose folders are real folders."
            ) from None
        raise  # a file where a folder should be, permissions: the caller reports the OSError


def _is_link(name: str, parent: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _check_still_reached(root: Path, rel: str, parent: int) -> None:
    """The folder held open is still the one reached from the root by name (not moved away)."""
    with _parent(root, rel, create=False) as (again, _):
        now, held = os.fstat(again), os.fstat(parent)
    if (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
        raise SafeWriteError(f"the folder of {rel} was moved or replaced during the write; nothing was written.")


def _parts(rel: str) -> list[str]:
    parts = [p for p in rel.replace(os.sep, "/").split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise SafeWriteError(f"{rel!r} is not a plain path below the workspace root.")
    return parts
