"""`python -m cli ...`: the `teachback` command without its installed entry point."""

import sys

from cli.entry import main

sys.exit(main())
