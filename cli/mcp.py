"""`teachback mcp`: allow a workspace's own MCP servers (its .mcp.json and the [mcp_servers] of its
teachback.toml) to start, revoke that, or list what a session there would start."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_mcp_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, summary in (
        ("allow", "let sessions in the workspace start the MCP servers it defines, as they are defined now"),
        ("revoke", "stop allowing the workspace's own MCP servers"),
        ("list", "show the MCP servers a session in the workspace starts, and those it does not (starts nothing)"),
    ):
        action = actions.add_parser(name, help=summary)
        action.add_argument("--workspace", type=Path, default=Path.cwd(), help="project root (default: cwd)")


def mcp_main(args: argparse.Namespace) -> int:
    from agent.mcp import trust
    from agent.mcp.config import fingerprint, load_servers, workspace_definitions, workspace_servers

    root = Path(args.workspace).resolve()
    if args.action == "revoke":
        known = trust.revoke(root)
        print(f"The MCP servers of {root} are {'no longer' if known else 'not'} allowed to start.")
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
        return 0
    own = workspace_definitions(root)
    if not own:
        print(
            f"teachback mcp allow: {root} defines no MCP servers (no .mcp.json, no [mcp_servers] in its "
            "teachback.toml). Pass the project's root with --workspace.",
            file=sys.stderr,
        )
        return 1
    trust.allow(root, fingerprint(own))
    print(f"Allowed the MCP servers {root} defines; sessions there start them from now on:")
    for server in workspace_servers(root):
        print(f"  {server.name}: {server.describe() or server.problem}  [{server.source}]")
    print("If these definitions change, they stop starting until you allow them again.")
    return 0
