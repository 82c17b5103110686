"""teachback's trainer: base weights, training on exported feedback pairs, serving adapters.

Needs the optional extra `train` (torch 2.13.0, transformers, peft, accelerate, trl). Nothing
outside this package imports it except the command line, lazily, so the agent runs without it.
"""

import os

# OpenMP threads that spin while they wait made a training step 4x slower on two cores shared with
# other processes (tests/conftest.py). torch's OpenMP runtime reads this when torch is first
# imported, which no module outside this package does; a value the user set is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
