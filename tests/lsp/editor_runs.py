"""Run a real editor (Emacs with eglot, Neovim) in batch mode against `teachback lsp`.

Each editor runs a script from tests/lsp/data/editors that opens a file, runs a scripted turn
through `teachback.ask`, saves, and writes what it found as JSON. The editor gets a hard timeout;
a test whose editor is not installed is skipped with the command that installs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.lsp.harness import DATA, REPO, scripted

SCRIPTS = DATA / "editors"
EDITOR_TIMEOUT = 180  # seconds for the whole editor run: start, a turn, a save

APP_BEFORE = "def greet(name):\n    return 'Hello, ' + name\n"
APP_AFTER = "def greet(name):\n    return f'Hello, {name}!'\n"


def teachback_program() -> str:
    program = Path(sys.executable).with_name("teachback")
    assert program.exists(), f"{program} is missing: install the project (pip install -e .) to get the command"
    return str(program)


def require(program: str, package: str) -> str:
    found = shutil.which(program)
    if found is None:
        pytest.skip(f"{program} is not installed; install it with `apt-get install -y {package}` (.ci/run does)")
    return found


def run_editor(argv: list[str], cwd: Path, env: dict[str, str], result: Path) -> dict[str, Any]:
    """Run the editor to its end and return its findings; its output is shown when it fails."""
    completed = subprocess.run(
        argv,
        cwd=cwd,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=EDITOR_TIMEOUT,
    )
    output = f"exit status {completed.returncode}\nstdout:\n{completed.stdout}\nstderr:\n{completed.stderr}"
    assert result.exists(), f"the editor wrote no findings to {result}\n{output}"
    return json.loads(result.read_text()) | {"output": output}


def readme_snippet(marker: str) -> str:
    """The code block that follows `<!-- marker -->` in README.md, exactly as written there."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    tag = f"<!-- {marker} -->\n"
    assert tag in readme, f"README.md has no {tag.strip()} before the snippet it marks"
    block = readme.split(tag, 1)[1]
    assert block.startswith("```"), f"{tag.strip()} must be followed by a code block"
    return block.split("\n", 1)[1].split("\n```\n", 1)[0] + "\n"


def turn_env(git_repo: Path, tmp_path: Path) -> dict[str, str]:
    return {
        "TB_SERVER": teachback_program(),
        "TB_MODEL": scripted("edit_open_file.json"),
        "TB_DB": str(tmp_path / "feedback.db"),
        "TB_FILE": str(git_repo / "app.py"),
        "TB_RESULT": str(tmp_path / "findings.json"),
    }
