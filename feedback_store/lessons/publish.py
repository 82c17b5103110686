"""Writing lessons where other agents read them: a folder of Agent Skills and a section of AGENTS.md
(rendered by feedback_store/lessons/skills.py).

Both are written only where their bytes change, so exporting again changes nothing, and each file
is replaced whole (a reader never sees half of one). What is not teachback's is never touched: a
skill folder without teachback's marker (a person's own, even under a name teachback would use), a
link in the skills folder, and every character of AGENTS.md outside teachback's markers.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from feedback_store.lessons.skills import BEGIN, SectionError, is_teachback_skill, with_section

SKILL_FILE = "SKILL.md"
MARKER_READ_BYTES = 64 * 1024  # a front matter is at its start: a huge file of someone else's is not read whole


class PublishError(Exception):
    """A skills folder or AGENTS.md that cannot be written as asked; the message says how to fix it."""


@dataclass
class SkillsReport:
    directory: Path
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # why a name was not written or not removed

    def summary(self) -> str:
        lines = [
            f"Skills in {self.directory}: {len(self.written)} written, {len(self.unchanged)} unchanged, "
            f"{len(self.removed)} removed (lessons no longer kept)."
        ]
        lines += [f"  left alone: {why}" for why in self.left]
        return "\n".join(lines)


def write_skills(directory: Path, skills: dict[str, str]) -> SkillsReport:
    """Each skill as `directory/NAME/SKILL.md`, and teachback's skills not in `skills` removed."""
    report = SkillsReport(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise PublishError(f"{directory} is a file, not a folder: give another skills folder.") from exc
    except OSError as exc:
        raise PublishError(f"cannot create the skills folder {directory}: {exc.strerror or exc}.") from exc
    for name, text in skills.items():
        folder = directory / name
        why = _not_ours(folder)
        if why:
            report.left.append(f"{name}: {why}; its lesson was not written")
            continue
        try:
            folder.mkdir(exist_ok=True)
            changed = write_if_changed(folder / SKILL_FILE, text)
        except OSError as exc:
            raise PublishError(f"cannot write {folder / SKILL_FILE}: {exc.strerror or exc}.") from exc
        (report.written if changed else report.unchanged).append(name)
    for folder in sorted(directory.iterdir()):
        if folder.name not in skills and not _not_ours(folder) and (folder / SKILL_FILE).is_file():
            _remove(folder, report)
    return report


def write_agents_md(path: Path, section: str, *, create: bool = True) -> str:
    """teachback's section of the AGENTS.md at `path` written; what was done, in words. A file that is
    a link is written where it points (CLAUDE.md and AGENTS.md are often one file under two names)."""
    target = path.resolve()
    try:
        existing = target.read_bytes().decode("utf-8") if target.exists() else None
    except UnicodeDecodeError as exc:
        raise PublishError(f"{path} is not UTF-8 text, so teachback leaves it as it is.") from exc
    except OSError as exc:
        raise PublishError(f"cannot read {path}: {exc.strerror or exc}.") from exc
    if existing is None and not create:
        return f"{path}: not created (no lessons yet)"
    try:
        text = with_section(existing, section)
    except SectionError as exc:
        raise PublishError(f"{path} was left as it is: {exc}.") from exc
    try:
        changed = write_if_changed(target, text)
    except OSError as exc:
        raise PublishError(f"cannot write {path}: {exc.strerror or exc}.") from exc
    if not changed:
        return f"{path}: unchanged"
    if existing is None:
        return f"{path}: created"
    return f"{path}: section {'updated' if BEGIN in existing else 'added at the end'}"


def write_if_changed(path: Path, text: str) -> bool:
    """Replace `path` with `text` unless it holds those bytes already; whether it was written. A new
    file gets the permissions the user's umask gives (a temporary file's own would be 0600)."""
    data = text.encode("utf-8")
    if path.is_file() and path.read_bytes() == data:
        return False
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    temporary = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        with temporary.open("xb") as out:
            out.write(data)
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return True


def _not_ours(folder: Path) -> str | None:
    """Why `folder` is not a skill of teachback's to write or remove (None: it is, or it does not exist)."""
    if folder.is_symlink():
        return "a link"
    if not folder.exists():
        return None
    if not folder.is_dir():
        return "not a folder"
    skill = folder / SKILL_FILE
    if skill.is_symlink():
        return f"its {SKILL_FILE} is a link"
    if not skill.exists():
        return None if not any(folder.iterdir()) else f"a folder without {SKILL_FILE}"
    try:
        with skill.open("rb") as file:
            head = file.read(MARKER_READ_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        return f"its {SKILL_FILE} cannot be read ({exc.strerror or exc})"
    return None if is_teachback_skill(head) else "a skill that is not teachback's"


def _remove(folder: Path, report: SkillsReport) -> None:
    try:
        (folder / SKILL_FILE).unlink()
        folder.rmdir()
    except OSError as exc:
        if (folder / SKILL_FILE).exists():
            raise PublishError(f"cannot remove {folder / SKILL_FILE}: {exc.strerror or exc}.") from exc
        report.left.append(f"{folder.name}: its {SKILL_FILE} was removed; the other files in it stay")
    report.removed.append(folder.name)
