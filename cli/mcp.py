"""`teachback mcp`: allow what a workspace defines that runs programs — its MCP servers (its .mcp.json
and the [mcp_servers] of its teachback.toml) and its hooks (its .claude/settings.json and the
[hooks] of its teachback.toml) — revoke that, or list what a session there would run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_mcp_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, summary in (
        ("allow", "let sessions in the workspace start the MCP servers and run the hooks it defines, as defined now"),
        ("revoke", "stop allowing the workspace's own MCP servers and hooks"),
        ("list", "show the MCP servers and hooks a session in the workspace runs, and those it does not"),
    ):
        action = actions.add_parser(name, help=summary)
        action.add_argument("--workspace", type=Path, default=Path.cwd(), help="project root (default: cwd)")


def mcp_main(args: argparse.Namespace) -> int:
    from agent.hooks import config as hooks
    from agent.mcp import trust
    from agent.mcp.config import fingerprint, load_servers, workspace_definitions, workspace_servers

    root = Path(args.workspace).resolve()
    if args.action == "revoke":
        known = [trust.revoke(root, kind) for kind in trust.SECTIONS]
        print(f"The MCP servers and hooks of {root} are {'no longer' if any(known) else 'not'} allowed to run.")
        return 0
    if args.action == "list":
        found = load_servers(root)
        for server in found.servers:
            state = f"  ({server.problem})" if server.problem else ""
            print(f"{server.name}: {server.describe()}  [{server.source}]{state}")
        if found.withheld is not None:
            print(found.withheld.notice())
            for server in workspace_servers(root):
                print(f"  not started: {server.name}: {server.describe() or server.problem}  [{server.source}]")
        if not found.servers and found.withheld is None:
            print(f"No MCP servers are configured for {root}.")
        for line in hooks_lines(root):
            print(line)
        return 0
    own, own_hooks = workspace_definitions(root), hooks.workspace_definitions(root)
    if not own and not own_hooks:
        print(
            f"teachback mcp allow: {root} defines no MCP servers and no hooks (no .mcp.json, no "
            ".claude/settings.json hooks, no [mcp_servers] or [hooks] in its teachback.toml). Pass the project's "
            "root with --workspace.",
            file=sys.stderr,
        )
        return 1
    if own:
        trust.allow(root, fingerprint(own))
        print(f"Allowed the MCP servers {root} defines; sessions there start them from now on:")
        for server in workspace_servers(root):
            print(f"  {server.name}: {server.describe() or server.problem}  [{server.source}]")
    if own_hooks:
        trust.allow(root, fingerprint(own_hooks), "hooks")
        print(f"Allowed the hooks {root} defines; sessions there run them from now on:")
        for hook in hooks.workspace_hooks(root):
            print(f"  {hook.describe()}  [{hook.source}]" + (f"  ({hook.problem})" if hook.problem else ""))
    print("If these definitions change, they stop running until you allow them again.")
    return 0


def hooks_lines(root: Path) -> list[str]:
    """One line per hook: what it runs on, where it comes from, and whether it runs."""
    from agent.hooks.config import hook_checks

    return [f"{name}: {detail}" for name, _, detail in hook_checks(root)]
