"""Composition of a session: settings, workspace, model, tools and system prompt."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from agent.config import Settings
from agent.hooks.config import load_hooks
from agent.interfaces import CommandTerminal, LessonSource
from agent.mcp.config import ServerConfig
from agent.mcp.servers import session_servers
from agent.model import LiteLLMModel
from agent.protocol import UserInput
from agent.session import Session
from agent.tools import ToolContext, default_toolbox
from agent.workspace import Workspace

log = logging.getLogger(__name__)


def open_session(
    workspace: str | Path,
    settings: Settings,
    *,
    frontend: str = "cli",
    session_id: str | None = None,
    history: list[dict[str, Any]] | None = None,
    lessons: LessonSource | None = None,
    mcp_servers: Sequence[ServerConfig] = (),
    terminal: CommandTerminal | None = None,
) -> Session:
    """A session on `workspace` with the configured model. Nothing slow happens here: litellm is
    imported at the first model call, the system prompt (with its repo map) is built at start, and
    the MCP servers (configured ones, and `mcp_servers` a client names) start with the first turn;
    the configured hooks (agent.hooks) run around its turns and calls.
    `lessons` (from the feedback store, wired by the frontend) adds lessons from earlier sessions;
    `terminal` (an editor's) is where run_command runs its commands."""
    space = Workspace(workspace)
    context = ToolContext(workspace=space, settings=settings, repo_map=_repo_map(space.root), terminal=terminal)
    sampling = {"max_tokens": settings.max_tokens, "temperature": settings.temperature, "seed": settings.seed}
    if settings.model.startswith("local/"):  # only the embedded provider reads it
        sampling["adapter"] = settings.adapter
        sampling["n_threads"] = settings.local_threads or None
    model = LiteLLMModel(
        settings.model,
        tool_mode=settings.tool_mode,
        api_base=settings.api_base,
        extra={k: v for k, v in sampling.items() if v is not None},
    )
    return Session(
        model=model,
        toolbox=default_toolbox(),
        context=context,
        frontend=frontend,
        system_prompt=lambda first: system_prompt(context, first),
        session_id=session_id,
        history=history,
        git_head=git_head(space.root),
        repository=repository_identity(space.root),
        lessons=lessons,
        tool_servers=session_servers(space.root, settings, mcp_servers),
        hooks=load_hooks(space.root),
    )


def system_prompt(context: ToolContext, first: UserInput) -> str:
    """The system prompt, with a repo map centred on what the first instruction names (built once
    per session, so it stays byte-identical for prompt caches)."""
    template = resources.files("agent").joinpath("prompts/system.md").read_text(encoding="utf-8")
    repo_map = ""
    if context.repo_map is not None and context.settings.repo_map_tokens > 0:
        from agent.repomap import identifiers_in

        rendered = context.repo_map.render(
            tokens=context.settings.repo_map_tokens,
            focus_paths=[ref.path for ref in first.context],
            mentioned=identifiers_in(first.text),
        )
        if rendered:
            repo_map = f"\nA map of the repository's most relevant definitions:\n{rendered}"
    # The folder's name, not its absolute path: a prompt that holds a temporary path differs between
    # two attempts at one task (and a small model copies it into the paths it invents).
    return template.format(workspace=context.workspace.root.name, repo_map=repo_map)


def git_head(root: Path) -> str | None:
    try:
        import git
    except ImportError:  # GitPython cannot import without a git binary on PATH
        return None
    try:
        with git.Repo(root, search_parent_directories=True) as repo:
            return repo.head.commit.hexsha
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return None  # not a repository, or one without commits


def repository_identity(root: Path) -> str | None:
    """What names the repository whatever folder holds it: its root commit (`git:<sha>`; of several
    roots, the first in order), the same in every clone and at every path. None outside a
    repository or before its first commit."""
    try:
        import git
    except ImportError:
        return None
    try:
        with git.Repo(root, search_parent_directories=True) as repo:
            roots = repo.git.rev_list("--max-parents=0", "HEAD").split()
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, git.GitCommandError, ValueError):
        return None
    return f"git:{min(roots)}" if roots else None


def _repo_map(root: Path) -> Any:
    try:
        from agent.repomap import RepoMap
    except ImportError:
        return None
    return RepoMap(root)
