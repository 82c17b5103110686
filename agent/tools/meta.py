"""Tools about the session itself: session_diff, repo_map, finish."""

from __future__ import annotations

from agent.toolkit import ToolResult, error, tool
from agent.tools.context import ToolContext


@tool("read", kind="read", title=lambda a: "Show this session's changes")
def session_diff(ctx: ToolContext) -> ToolResult:
    """Show the unified diff of every change made in this session so far."""
    diff = ctx.session_diff()
    return ToolResult(diff or "No changes in this session yet.")


@tool(
    "read",
    target="focus",
    kind="read",
    title=lambda a: "Map the repository" + (f" around {a['focus']}" if a.get("focus") else ""),
)
def repo_map(ctx: ToolContext, focus: str | None = None) -> ToolResult:
    """Show a ranked map of the repository's most relevant definitions (files, classes, functions
    with their signatures).

    Args:
        focus: Space-separated file paths or identifiers to centre the map on.
    """
    if ctx.repo_map is None:
        return error("The repository map is not available in this installation; use list_files and search.")
    from agent.repomap import split_focus

    paths, names = split_focus(ctx.workspace.root, (focus or "").split())
    text = ctx.repo_map.render(
        tokens=ctx.settings.repo_map_tokens,
        focus_paths=paths,
        mentioned=names,
        edited_paths=list(ctx.changes.originals),
    )
    return ToolResult(text or "The repository has no source files teachback can map.", target=focus)


@tool("finish")
def finish(ctx: ToolContext, summary: str) -> ToolResult:
    """Finish the task: call this once the work is done (and checked), with a short summary.

    Args:
        summary: What was changed and how it was verified.
    """
    return ToolResult(f"Finished: {summary}")
