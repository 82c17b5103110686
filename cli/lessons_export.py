"""`teachback lessons export --skills [DIR] --agents-md [FILE]`: this repository's lessons where other
agents read them, as Agent Skills and as a section of AGENTS.md.

The lessons are those of the repository the current folder is in (sessions recorded, captured or
imported there or in any clone of it) after pending pairs are distilled (`lessons_main` does that
first), redacted as exports are. Both paths default to the repository's top folder: skills go to
`.claude/skills` when a `.claude` folder is there (Claude Code reads it), else to `.agents/skills`
(Codex and the other agents of the Agent Skills format read it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cli.options import EXIT_OK, EXIT_USAGE

DEFAULT = "(the default)"  # an option given without a value


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Write this repository's lessons for the agents a team uses: Agent Skills (a folder per lesson "
        "with SKILL.md) and one marked section of AGENTS.md. Exporting again changes only what changed."
    )
    parser.add_argument(
        "--skills",
        nargs="?",
        const=DEFAULT,
        metavar="DIR",
        help="the skills folder (default: .claude/skills at the repository's top when .claude is there, "
        "else .agents/skills)",
    )
    parser.add_argument(
        "--agents-md",
        nargs="?",
        const=DEFAULT,
        metavar="FILE",
        help="write or update teachback's section of this file (default: AGENTS.md at the repository's top)",
    )


def export_lessons(store: Any, args: argparse.Namespace) -> int:
    from agent.runtime import repository_identity
    from agent.snapshot import GitRepo
    from feedback_store.lessons.manage import repository_lessons
    from feedback_store.lessons.publish import PublishError, write_agents_md, write_skills
    from feedback_store.lessons.skills import agents_section, redacted, skill_files

    if args.skills is None and args.agents_md is None:
        print(
            "teachback lessons export: say what to write: --skills [DIR], --agents-md [FILE], or both.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    here = Path.cwd().resolve()
    found = GitRepo.find(here)
    top = found.top.resolve() if found else here
    rows = redacted(repository_lessons(store, str(top), repository_identity(top)))
    try:
        if args.skills is not None:
            print(write_skills(_chosen(args.skills, default_skills_folder(top)), skill_files(rows)).summary())
        if args.agents_md is not None:
            path = _chosen(args.agents_md, top / "AGENTS.md")
            print(write_agents_md(path, agents_section(rows), create=bool(rows)))
    except PublishError as exc:
        print(f"teachback lessons export: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{len(rows)} lesson{'s' if len(rows) != 1 else ''} of {top}.")
    return EXIT_OK


def default_skills_folder(top: Path) -> Path:
    """Claude Code's project skills folder where the repository already has a `.claude` folder, else
    the folder of the Agent Skills format's other readers (Codex among them)."""
    return top / (".claude/skills" if (top / ".claude").is_dir() else ".agents/skills")


def _chosen(given: str, default: Path) -> Path:
    return default if given == DEFAULT else Path(given).expanduser().resolve()
