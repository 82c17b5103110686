"""`teachback import`, `share`, `unshare` and `merge`: argument wiring and entry points.

A session's repository is named by agent.runtime.repository_identity, as a live session names it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cli.options import EXIT_OK, EXIT_STOPPED, EXIT_USAGE, configured_db

AGENTS = {
    "claude-code": ("feedback_store.importers.claude", "~/.claude/projects (or $CLAUDE_CONFIG_DIR/projects)"),
    "codex": ("feedback_store.importers.codex", "~/.codex/sessions (or $CODEX_HOME/sessions)"),
}


def _db(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", metavar="PATH", help="feedback database (default: $TEACHBACK_HOME/feedback.db)")


def add_import_arguments(parser: argparse.ArgumentParser) -> None:
    agents = parser.add_subparsers(dest="agent", required=True, metavar="AGENT")
    for name, (_, where) in AGENTS.items():
        agent = agents.add_parser(name, help=f"import {name} sessions (default: every log under {where})")
        agent.add_argument("path", nargs="?", type=Path, help=f"a session log or a folder of them (default: {where})")
        _db(agent)
    atif = agents.add_parser("atif", help="import any agent's ATIF trajectories (v1.0 to v1.8), Harbor jobs included")
    atif.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="PATH",
        help="a trajectory (.json), a file of one per line (.jsonl), or a folder of them (a Harbor jobs folder)",
    )
    _db(atif)


def add_share_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sessions", nargs="*", metavar="SESSION", help="session ids (see --list)")
    for flag, about in (
        (
            "--repository",
            "every session, past and future, of the repository DIR holds (default: the current folder), in any clone",
        ),
        ("--workspace", "let DIR's teachback.toml decide (share = true in it shares the sessions recorded there)"),
    ):
        parser.add_argument(flag, nargs="?", const=Path("."), type=Path, metavar="DIR", help=about)
    parser.add_argument("--list", action="store_true", help="show the settings and how many sessions are shared")
    _db(parser)


def add_merge_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sources", nargs="+", type=Path, metavar="DB", help="the stores to merge (only read)")
    parser.add_argument("--into", required=True, type=Path, metavar="PATH", help="the team store (created if missing)")
    parser.add_argument("--shared-only", action="store_true", help="only the sessions their user shared")
    parser.add_argument(
        "--skip-unreadable",
        action="store_true",
        help="merge the readable stores when some cannot be read (still exits 1, naming them)",
    )
    parser.set_defaults(db=None)  # reads no configured store: the sources are named


def import_main(args: argparse.Namespace) -> int:
    """Exit 0 when what could be read was imported (skipped lines and files are counted and named),
    2 when nothing given could be read: the path is missing or unreadable, or no log found in it is."""
    from importlib import import_module

    from agent.runtime import repository_identity
    from feedback_store.importers.imports import import_logs
    from feedback_store.store import open_store

    if args.agent == "atif":
        return _import_atif(args)
    module = import_module(AGENTS[args.agent][0])
    root = (args.path or module.default_root()).expanduser()
    unreadable = _unreadable_folder(root)
    if unreadable is not None:
        print(
            f"teachback import {args.agent}: {unreadable}. Give the folder that holds the "
            f"{args.agent} session logs (or one log file): teachback import {args.agent} PATH.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    with open_store(args.db or configured_db()) as store:
        report = import_logs(
            store, module.AGENT, module.find_files(root), lambda path: module.read(path, repository_identity)
        )
    print(report.summary(args.agent))
    for problem in report.problems:
        print(f"teachback import {args.agent}: could not read {problem}", file=sys.stderr)
    return EXIT_USAGE if report.nothing_read else EXIT_OK


def _import_atif(args: argparse.Namespace) -> int:
    """Exit 0 when at least one trajectory was imported (now, or before from a file unchanged since);
    2 when none was: every path is missing or unreadable, or holds no trajectory teachback can read."""
    from feedback_store.importers.atif import find_files, import_trajectories
    from feedback_store.store import open_store

    files: list[Path] = []
    for path in args.paths:
        root = path.expanduser()
        unreadable = _unreadable_folder(root)
        if unreadable is not None:
            print(f"teachback import atif: {unreadable}; it is left out.", file=sys.stderr)
            continue
        files += [f for f in find_files(root) if f not in files]
    if not files:
        print(
            "teachback import atif: no file to read. Give ATIF trajectories: a .json file, a .jsonl file with "
            "one per line, or a folder of them (a Harbor jobs folder): teachback import atif PATH...",
            file=sys.stderr,
        )
        return EXIT_USAGE
    with open_store(args.db or configured_db()) as store:
        report = import_trajectories(store, files)
    print(report.summary("ATIF", units="trajectories and files"))
    for problem in report.problems:
        print(f"teachback import atif: could not read {problem}", file=sys.stderr)
    return EXIT_OK if report.sessions_read or report.unchanged else EXIT_USAGE


def _unreadable_folder(root: Path) -> str | None:
    """Why a folder given to import cannot be read, or None (a file is checked as it is read)."""
    try:
        if not root.is_dir():
            return None if root.exists() or root.is_symlink() else f"{root} does not exist"
        with os.scandir(root):
            return None
    except OSError as exc:
        return f"{root} cannot be read ({exc.strerror or exc})"


def share_main(args: argparse.Namespace) -> int:
    return _set(args, True)


def unshare_main(args: argparse.Namespace) -> int:
    return _set(args, False)


def _set(args: argparse.Namespace, shared: bool) -> int:
    from agent.runtime import repository_identity
    from feedback_store.store import open_store
    from feedback_store.team.sharing import describe, resolve, set_share

    verb = "share" if shared else "unshare"
    if not (args.sessions or args.repository or args.workspace or args.list):
        print(
            f"teachback {verb}: say what to {verb}: session ids, --repository [DIR] or --workspace [DIR] "
            "(or --list to see the settings).",
            file=sys.stderr,
        )
        return 2
    with open_store(args.db or configured_db()) as store:
        known = store.session_ids()
        missing = [s for s in args.sessions if s not in known]
        if missing:
            print(
                f"teachback {verb}: no session {', '.join(missing)} in {store.path}. "
                "`teachback stats` and the terminal app list the recorded sessions.",
                file=sys.stderr,
            )
            return 1
        for session in args.sessions:
            set_share(store, "session", session, shared, f"{'shared' if shared else 'unshared'} with teachback {verb}")
            print(f"Session {session}: {'shared' if shared else 'not shared'}.")
        if args.repository is not None:
            identity = repository_identity(args.repository.resolve())
            if identity is None:
                print(
                    f"teachback {verb}: {args.repository.resolve()} is not in a git repository with a commit, so "
                    f"it has no identity to {verb} by. {verb.capitalize()} its sessions by id instead.",
                    file=sys.stderr,
                )
                return 1
            set_share(store, "repository", identity, shared, f"its repository was {verb}d with teachback {verb}")
            print(f"Repository {identity}: its sessions are {'shared' if shared else 'not shared'}.")
        if args.workspace is not None:
            folder = str(args.workspace.resolve())
            # Allowing is what unshare --workspace takes back: the file decides nothing then.
            set_share(store, "workspace", folder, True if shared else None, "you allowed its teachback.toml")
            print(
                f"Workspace {folder}: "
                + (
                    "its teachback.toml (share = true) now decides."
                    if shared
                    else "its teachback.toml decides nothing."
                )
            )
        if args.list:
            for line in describe(store.query):
                print(line)
            states = resolve(store.query)
            print(f"{sum(s.shared for s in states.values())} of {len(states)} sessions are shared.")
    return 0


def merge_main(args: argparse.Namespace) -> int:
    """Exit 0 when every source was merged; 1 when --skip-unreadable left some out (each named);
    2 (a StoreError, with nothing of the unreadable source added) without it."""
    from feedback_store.team.merge import merge

    report = merge(args.sources, args.into, shared_only=args.shared_only, skip_unreadable=args.skip_unreadable)
    added = ", ".join(f"{n} {table}" for table, n in sorted(report.added.items()) if n) or "nothing new"
    print(f"Merged {report.sources} store(s) into {args.into}: {added}.")
    if report.left_out:
        print(f"Left out {report.left_out} session(s) their user has not shared.")
    for unreadable in report.unreadable:
        print(f"teachback merge: left out {unreadable}", file=sys.stderr)
    return EXIT_STOPPED if report.unreadable else EXIT_OK
