"""A real Neovim (headless, its built-in LSP client) set up with the README's configuration exactly
as written there drives `teachback lsp`: opening a file starts the server, the README's keymap runs
a turn and shows its result, the agent's edit to the open file arrives in the buffer, Neovim sees
no file changed under it, and saving writes it."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.lsp.editor_runs import APP_AFTER, APP_BEFORE, SCRIPTS, readme_snippet, require, run_editor, turn_env


@pytest.mark.timeout(240)
def test_the_readme_neovim_setup_runs_a_turn_and_shows_its_result(git_repo: Path, tmp_path: Path) -> None:
    nvim = require("nvim", "neovim")
    snippet = tmp_path / "teachback.lua"
    snippet.write_text(readme_snippet("neovim-snippet"))
    env = turn_env(git_repo, tmp_path) | {
        "TB_SNIPPET": str(snippet),
        "TB_INSTRUCTION": "greet with an exclamation mark",
        # The README's `cmd = { "teachback", "lsp" }` finds this installation's command; its
        # settings come from the environment, as the README says.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "TEACHBACK_MODEL": turn_env(git_repo, tmp_path)["TB_MODEL"],
        "TEACHBACK_APPROVAL": "full-auto",
        "TEACHBACK_DB": str(tmp_path / "feedback.db"),
    }
    argv = [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {SCRIPTS / 'nvim_turn.lua'}"]
    found = run_editor(argv, tmp_path, env, tmp_path / "findings.json")
    output = found.pop("output")

    assert found.get("error") is None, output
    assert found["rootDir"] == str(git_repo)  # the folder holding .git
    # The keymap's result is shown, not dropped.
    assert found["notes"] == [
        {"message": "teachback (answered, 3 steps): The greeting now ends with an exclamation mark.", "level": 2}
    ], output
    assert found["questions"] == [], output  # :checktime found no file changed under the buffer
    assert found["buffer"] == APP_AFTER and found["modified"] is True
    assert found["diskAfterTurn"] == APP_BEFORE
    assert found["diskAfterSave"] == APP_AFTER == (git_repo / "app.py").read_text()
    assert found["modifiedAfterSave"] is False
    # During the turn the agent's command saw the edit on disk.
    assert (tmp_path / "seen-by-command.py").read_text() == APP_AFTER
