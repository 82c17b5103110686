"""The agent runs without the `train` extra: importing any module (the command line's train, eval and
learn included) pulls in no torch or its stack."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import importlib, pkgutil, sys
for package in ("cli", "common", "agent", "feedback_store", "lsp_server", "tui", "tasks", "trainer"):
    try:
        root = importlib.import_module(package)
    except ModuleNotFoundError:
        continue
    for module in pkgutil.walk_packages(root.__path__, package + "."):
        if not module.name.endswith("__main__"):  # a __main__ would start the program
            importlib.import_module(module.name)
print(sorted(m for m in ("torch", "transformers", "trl", "peft", "accelerate") if m in sys.modules))
"""


def test_importing_every_module_pulls_in_no_training_stack() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=110)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
