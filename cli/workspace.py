"""`teachback undo` and `teachback doctor`: a workspace's last checkpoint, and whether everything a
session needs there works."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cli.options import EXIT_OK, EXIT_STOPPED, add_session_options, settings_for


def add_undo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=Path, default=Path.cwd())


def undo_main(args: argparse.Namespace) -> int:
    from agent.checkpoint import UndoError, undo_last

    try:
        restored = undo_last(args.workspace)
    except UndoError as exc:
        print(f"teachback: {exc}", file=sys.stderr)
        return EXIT_STOPPED
    print("Restored:" if restored else "The working tree already matches the last checkpoint.")
    for path in restored:
        print(f"  {path}")
    return EXIT_OK


def add_doctor_arguments(parser: argparse.ArgumentParser) -> None:
    add_session_options(parser)


def doctor_main(args: argparse.Namespace) -> int:
    from cli.doctor import run_checks

    return run_checks(args.workspace, lambda: settings_for(args), _database_problem)


def _database_problem(path: Path) -> str | None:
    """Why the feedback database at `path` cannot be opened, or None when it can."""
    from feedback_store import StoreError, open_store

    try:
        open_store(path).close()
    except StoreError as exc:
        return str(exc)
    return None
