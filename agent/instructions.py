"""Project instructions: the `AGENTS.md` files (`CLAUDE.md` in a folder that has no `AGENTS.md`) a
session shows the model, as Codex and Claude Code do.

At the start the user's own file (in `TEACHBACK_HOME`) and the workspace root's go into the system
prompt. A folder below the root is looked at the first time a turn names a path under it (a file the
user points at, a path a tool call reads, lists, searches or writes): its file and those of the folders
between it and the root are appended to that user message or tool result, so the model has them from
its next call on. Files come root first and closest last, and the text says that the closer one wins.
What is shown is part of the messages the session records, so exports and state replay carry it.

Reading is bounded (a cap per file and one per session) and never blocks: a file that is not a
regular text file inside the workspace (a folder, a named pipe, a link out, binary, unreadable) is
left out and named in a notice."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.protocol.roles import Roles
from agent.workspace import Workspace, WorkspaceError

NAMES = ("AGENTS.md", "CLAUDE.md")  # in each folder the first that exists is the folder's file
FILE_BYTES = 32 * 1024  # per file: Codex's project_doc_max_bytes
GLOB_CHARS = frozenset("*?[")
# A file as `InstructionFile.render` shows it: its folder ("" for the root, TEACHBACK_HOME/) and text.
SHOWN = re.compile(
    r'<instructions from="(?P<folder>[^"]*?)(?:AGENTS|CLAUDE)\.md" for="[^"]*">\n(?P<text>.*?)\n</instructions>', re.S
)
RULE = (
    "They come in order: your own first, then the repository root's, then each folder's below it, the "
    "closest last. Where two disagree, the one for the folder closer to the file you work on wins."
)


@dataclass(frozen=True)
class InstructionFile:
    label: str  # how the model and the user know it: "AGENTS.md", "src/api/CLAUDE.md", "TEACHBACK_HOME/AGENTS.md"
    scope: str  # the folder it covers, relative ("" for the root); "*" for the user's own file
    text: str  # what is shown (cut at the cap when `truncated`)
    size: int  # bytes on disk
    truncated: bool = False

    def render(self) -> str:
        covers = {"*": "every repository", "": "the whole repository"}.get(self.scope, f"files under {self.scope}/")
        cut = (
            f"\n[... cut here: the file is {self.size:,} bytes and only {len(self.text.encode()):,} are shown]"
            if self.truncated
            else ""
        )
        return f'<instructions from="{self.label}" for="{covers}">\n{self.text.strip()}{cut}\n</instructions>'


@dataclass(frozen=True)
class Found:
    """Files newly read for the model, and notices about files left out (one line each, for the user)."""

    files: tuple[InstructionFile, ...] = ()
    notices: tuple[str, ...] = ()

    def text(self, *, start: bool) -> str:
        """What is appended for the model ("" when nothing new was read)."""
        if not self.files:
            return ""
        body = "\n".join(f.render() for f in self.files)
        if start:
            return f"\n\nProject instructions (AGENTS.md files); follow them. {RULE}\n{body}\n"
        folders = ", ".join(f"{f.scope}/" for f in self.files)
        return (
            f"\n\nMore project instructions, for {folders}: they apply to the files there and come after "
            f"the ones you have, so where they disagree these win.\n{body}\n"
        )


class ProjectInstructions:
    """What one session has shown: each folder is looked at once; `budget` bytes in all (0: none)."""

    def __init__(self, workspace: Workspace, home: Path | None, budget: int) -> None:
        self.workspace = workspace
        self.home = home
        self.left = budget
        self.enabled = budget > 0
        self.looked: set[str] = set()

    def resume(self, messages: Iterable[dict[str, Any]]) -> None:
        """Continue a recorded conversation: what its messages already show is not shown again and
        counts against the budget."""
        for message in messages:
            content = message.get("content")
            for match in SHOWN.finditer(content if isinstance(content, str) else ""):
                self.looked.add(match["folder"].rstrip("/"))
                self.left -= len(match["text"].encode())

    def at_start(self) -> Found:
        """The user's own file and the workspace root's, for the system prompt."""
        if not self.enabled:
            return Found()
        self.looked.add("")
        found: list[InstructionFile] = []
        notices: list[str] = []
        if self.home is not None:
            self._take(folder_file(self.home, None, "TEACHBACK_HOME/", FILE_BYTES), "*", found, notices)
        self._take(folder_file(self.workspace.root, self.workspace, "", FILE_BYTES), "", found, notices)
        return Found(tuple(found), tuple(notices))

    def for_paths(self, paths: Iterable[str]) -> Found:
        """The files of the folders between the root and `paths` not looked at yet, root first."""
        if not self.enabled:
            return Found()
        found: list[InstructionFile] = []
        notices: list[str] = []
        for folder in self._new_folders(paths):
            self.looked.add(folder)
            read = folder_file(self.workspace.root / folder, self.workspace, f"{folder}/", FILE_BYTES)
            self._take(read, folder, found, notices)
        return Found(tuple(found), tuple(notices))

    def _new_folders(self, paths: Iterable[str]) -> Iterator[str]:
        for path in paths:
            for folder in self._folders_of(path):
                if folder not in self.looked:
                    yield folder

    def _folders_of(self, path: str) -> list[str]:
        """The folders from the root down to `path`'s (`path` itself when it is a folder), relative,
        the root left out; none for a path outside the workspace."""
        parts = [p for p in path.split("/") if p]
        cut = next((i for i, part in enumerate(parts) if GLOB_CHARS & set(part)), len(parts))
        if cut == 0:
            return []  # nothing before the pattern: the root, already looked at
        try:
            resolved = self.workspace.resolve(("/" if path.startswith("/") else "") + "/".join(parts[:cut]))
        except WorkspaceError:
            return []
        rel = self.workspace.relative(resolved)
        names = [] if rel == "." else rel.split("/")
        if not resolved.is_dir():
            names = names[:-1]
        return ["/".join(names[: i + 1]) for i in range(len(names))]

    def _take(self, read: Read, scope: str, found: list[InstructionFile], notices: list[str]) -> None:
        if read.problem is not None:
            notices.append(f"{read.label} {read.problem}; it is left out of what the model sees.")
            return
        if read.text is None or not read.text.strip():
            return  # no file, or an empty one (Codex skips those too)
        if self.left <= 0:
            notices.append(
                f"{read.label} is left out: the instructions already shown fill instructions_bytes. "
                "Raise that setting, or shorten the files."
            )
            return
        text, truncated = read.text, read.truncated
        data = text.encode()
        if len(data) > self.left:
            text, truncated = data[: self.left].decode(errors="ignore"), True
        self.left -= len(text.encode())
        found.append(InstructionFile(read.label, scope, text, read.size, truncated))
        if truncated:
            notices.append(
                f"{read.label} is {read.size:,} bytes; only its first {len(text.encode()):,} are shown "
                f"(at most {FILE_BYTES:,} per file and instructions_bytes in all). Shorten it."
            )


@dataclass(frozen=True)
class Read:
    label: str
    text: str | None = None  # None: no such file, or it could not be read (then `problem`)
    size: int = 0
    truncated: bool = False
    problem: str | None = None


def folder_file(folder: Path, workspace: Workspace | None, prefix: str, limit: int) -> Read:
    """The instructions file of `folder` (the first of NAMES that exists), read within `limit` bytes.
    With a `workspace`, the file must lie inside it, links followed."""
    for name in NAMES:
        path = folder / name
        try:
            os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError as exc:  # a folder on the way that cannot be listed, or is no longer a folder
            return Read(prefix + name, problem=f"could not be looked at ({exc.strerror or exc})")
        return read_file(path, workspace, prefix + name, limit)
    return Read(prefix + NAMES[0])


def read_file(path: Path, workspace: Workspace | None, label: str, limit: int) -> Read:
    """One instructions file: regular, UTF-8, at most `limit` bytes read; never blocks (a named pipe
    is refused before it is opened, and it is opened without waiting for a writer)."""
    try:
        if workspace is not None:
            path = workspace.resolve(str(path))
        info = os.stat(path)
    except WorkspaceError:
        return Read(label, problem="is a link that leads out of the workspace, which is never followed")
    except OSError as exc:
        return Read(label, problem=f"could not be looked at ({exc.strerror or exc}); a link to nothing?")
    if stat.S_ISDIR(info.st_mode):
        return Read(label, problem="is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        return Read(label, problem="is not a regular file (a named pipe, socket or device), so it is never read")
    try:
        handle: Any = (
            workspace.open_inside(path)
            if workspace is not None
            else os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb")
        )
        with handle:
            data = handle.read(limit + 1)
    except WorkspaceError:
        return Read(label, problem="led out of the workspace while it was being read")
    except OSError as exc:
        return Read(label, problem=f"could not be read ({exc.strerror or exc}); check its permissions")
    return _decoded(label, data, info.st_size, limit)


def _decoded(label: str, data: bytes, size: int, limit: int) -> Read:
    truncated = len(data) > limit
    data = data[:limit]
    if b"\x00" in data:
        return Read(label, problem="is a binary file, not text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if not (truncated and exc.start >= len(data) - 3):  # more than a character cut at the cap
            return Read(label, problem=f"is not UTF-8 text (invalid byte at offset {exc.start}); save it as UTF-8")
        text = data[: exc.start].decode("utf-8")
    return Read(label, text=text, size=max(size, len(data)), truncated=truncated)


def paths_named(roles: Roles, arguments: Any) -> list[str]:
    """The paths a call's arguments name for reading or writing (its tool's declared roles)."""
    if not isinstance(arguments, dict):
        return []
    return [v for name in (*roles.reads, *roles.writes) if isinstance(v := arguments.get(name), str) and v]


def survey(
    workspace: Workspace, home: Path | None, budget: int, max_folders: int = 2000
) -> tuple[list[str], list[str]]:
    """For `teachback doctor`: the instructions files a session would read and when (one line each),
    and the files it would leave out, with why. The folders below the root are walked (hidden ones
    left out) up to `max_folders`."""
    if budget <= 0:
        return ["none are read (instructions_bytes = 0)"], []
    shown: list[str] = []
    problems: list[str] = []

    def note(read: Read, when: str) -> None:
        if read.problem is not None:
            problems.append(f"{read.label} {read.problem}")
        elif read.text is not None and read.text.strip():
            cut = f", only the first {FILE_BYTES:,} shown" if read.truncated else ""
            shown.append(f"{read.label} ({read.size:,} bytes{cut}) {when}")

    if home is not None:
        note(folder_file(home, None, "TEACHBACK_HOME/", FILE_BYTES), "at the start")
    note(folder_file(workspace.root, workspace, "", FILE_BYTES), "at the start")
    folders = 0
    for here, subfolders, files in os.walk(workspace.root):
        subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
        rel = Path(here).relative_to(workspace.root).as_posix()
        if rel != "." and any(name in NAMES for name in (*subfolders, *files)):
            note(folder_file(Path(here), workspace, f"{rel}/", FILE_BYTES), f"when a turn works under {rel}/")
        folders += 1
        if folders >= max_folders:
            shown.append(f"(only the first {max_folders:,} folders were looked at)")
            break
    return shown, problems
