"""What several commands share: the exit statuses, a session's options, where work runs (a local
pool or Ray), and the database a command reads when it is given no --db."""

from __future__ import annotations

import argparse
from pathlib import Path

from agent.config import APPROVAL_MODES, Settings, load_settings

# 0: the turn finished; 1: it stopped (a limit, an interrupt, a model or internal error); 2: the
# command, the configuration, the database or the model cannot be used as given; 3: the session
# ran but some of its events are not in the feedback database.
EXIT_OK, EXIT_STOPPED, EXIT_USAGE, EXIT_UNRECORDED = 0, 1, 2, 3


def add_session_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=Path, default=Path.cwd(), help="project root (default: cwd)")
    add_settings_options(parser)


def add_settings_options(parser: argparse.ArgumentParser) -> None:
    """The options `settings_for` reads besides the workspace (which a command may take as an argument)."""
    parser.add_argument("--model", help="litellm model string, e.g. anthropic/claude-sonnet-4-5")
    parser.add_argument("--approval", choices=APPROVAL_MODES, help="when to ask before edits and commands")
    parser.add_argument("--max-steps", type=int, help="stop after this many model calls per turn")
    parser.add_argument("--max-cost", type=float, help="stop once a turn has cost this many USD")
    parser.add_argument("--db", help="feedback database (default: $TEACHBACK_HOME/feedback.db)")


def add_executor_options(parser: argparse.ArgumentParser, units: str, *, parallel: bool = True) -> None:
    """--parallel, --executor and --address (tasks.executors), for work done in `units`; without
    `parallel`, the command's own --parallel says how many at once on Ray."""
    if parallel:
        parser.add_argument("--parallel", type=int, default=1, help=f"{units} at once (default 1; 0 with Ray: all)")
    parser.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help=f"local process pool, or Ray for the {units} (pip install 'teachback[ray]')",
    )
    parser.add_argument("--address", help="Ray cluster address, e.g. auto (default: start a local Ray)")


def settings_for(args: argparse.Namespace) -> Settings:
    base = load_settings(args.workspace)
    return base.replace(
        model=args.model, approval=args.approval, max_steps=args.max_steps, max_cost=args.max_cost, db=args.db
    )


def configured_db() -> str:
    """The database a store command reads without --db: `db` in teachback.toml or TEACHBACK_DB,
    else the default one."""
    return str(load_settings(Path.cwd()).db_path())
