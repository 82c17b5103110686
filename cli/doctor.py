"""`teachback doctor`: check what teachback needs (MCP servers and hooks included), and say how to fix
what is missing."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from agent.config import ConfigError, Settings, config_sources, teachback_home
from agent.startup_checks import Check, check_git, check_model


def run_checks(
    workspace: Path, load_settings: Callable[[], Settings], open_database: Callable[[Path], str | None], out=None
) -> int:
    """`load_settings` reads the configuration (raising ConfigError); `open_database` opens the feedback
    database at a path and returns why it cannot be used, or None (both come from the command line)."""
    out = out or sys.stdout  # looked up now: a default bound at import would keep a stream replaced since
    results: list[Check] = [_check_python(), check_git(workspace)]
    settings: Settings | None = None
    try:
        settings = load_settings()
        results.append(("configuration", True, _settings_that_matter(settings)))
        read = config_sources(workspace)
        results.append(("read", True, ", ".join(read) if read else "no config file or TEACHBACK_ variable: defaults"))
    except ConfigError as exc:
        results.append(("configuration", False, str(exc)))
    if settings is not None:
        results.append(_check_database(settings, open_database))
        results.append(check_model(settings))
        results.append(_check_instructions(workspace, settings))
        results.extend(_check_mcp(workspace, settings))
        results.extend(_check_hooks(workspace))
    for name, ok, detail in results:
        out.write(f"{'ok ' if ok else 'FAIL'} {name}: {detail}\n")
    failed = [name for name, ok, _ in results if not ok]
    out.write("All checks passed.\n" if not failed else f"{len(failed)} check(s) failed: {', '.join(failed)}\n")
    return 0 if not failed else 1


def _settings_that_matter(settings: Settings) -> str:
    shown = ("model", "approval", "db", "max_steps", "max_cost", "max_time", "max_tokens", "tool_mode", "lessons")
    return ", ".join(f"{name} {getattr(settings, name)}" for name in shown if hasattr(settings, name))


def _check_python() -> Check:
    ok = sys.version_info >= (3, 11)
    return ("python", ok, sys.version.split()[0] + ("" if ok else " (teachback needs Python 3.11 or newer)"))


def _check_database(settings: Settings, open_database: Callable[[Path], str | None]) -> Check:
    path = settings.db_path()
    problem = open_database(path)
    return ("database", problem is None, problem or str(path))


def _check_instructions(workspace: Path, settings: Settings) -> Check:
    """The AGENTS.md / CLAUDE.md files a session reads and when; one it would leave out fails."""
    from agent.instructions import survey
    from agent.workspace import Workspace, WorkspaceError

    try:
        shown, problems = survey(Workspace(workspace), teachback_home(), settings.instructions_bytes)
    except WorkspaceError as exc:
        return ("instructions", False, str(exc))
    detail = "; ".join(shown) or "no AGENTS.md or CLAUDE.md in the workspace or TEACHBACK_HOME"
    if not problems:
        return ("instructions", True, detail)
    left_out = "; ".join(problems)
    fix = "make each a UTF-8 text file inside the workspace, or remove it"
    return ("instructions", False, f"left out of what the model sees: {left_out} ({fix}). Read: {detail}")


def _check_mcp(workspace: Path, settings: Settings) -> list[Check]:
    from agent.mcp.doctor import server_checks  # starts each configured server, as a session would

    return server_checks(workspace, settings)


def _check_hooks(workspace: Path) -> list[Check]:
    from agent.hooks.config import hook_checks  # each hook, where it comes from, and whether it runs

    return hook_checks(workspace)
