"""`python -m lsp_server [--tcp HOST:PORT]`: the same server as `teachback lsp`."""

from __future__ import annotations

import argparse
import sys

from lsp_server import main

parser = argparse.ArgumentParser(prog="python -m lsp_server", description="teachback's language server")
parser.add_argument("--tcp", metavar="HOST:PORT", help="listen on TCP instead of stdio")
sys.exit(main(parser.parse_args().tcp))
