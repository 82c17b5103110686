"""`python -m trainer train|eval|learn ...`: the trainer's commands without the `teachback` entry
point, for `accelerate launch -m trainer train --data FILE --out DIR`."""

import sys

from cli.commands import TRAINER_COMMANDS
from cli.entry import main

if len(sys.argv) < 2 or sys.argv[1] not in TRAINER_COMMANDS:
    sys.exit(f"usage: python -m trainer {{{','.join(TRAINER_COMMANDS)}}} [options]")
sys.exit(main(sys.argv[1:]))
