"""teachback's language server: the agent in any editor that speaks LSP (`teachback lsp`)."""

from __future__ import annotations


def main(tcp: str | None = None) -> int:
    """Run the server on stdio, or on TCP at "HOST:PORT"; returns the exit status."""
    from lsp_server.server import main as serve

    return serve(tcp)
