"""A real Neovim (headless, its built-in LSP client) drives `teachback lsp`: the agent's edit to an
open file arrives in the buffer, Neovim sees no file changed under it, and saving writes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lsp.editor_runs import APP_AFTER, APP_BEFORE, SCRIPTS, require, run_editor, turn_env


@pytest.mark.timeout(240)
def test_neovim_gets_the_agents_edit_in_its_buffer_without_a_question(git_repo: Path, tmp_path: Path) -> None:
    nvim = require("nvim", "neovim")
    env = turn_env(git_repo, tmp_path)
    argv = [nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {SCRIPTS / 'nvim_turn.lua'}"]
    found = run_editor(argv, tmp_path, env, tmp_path / "findings.json")
    output = found.pop("output")

    assert found.get("error") is None, output
    assert found["questions"] == [], output  # :checktime found no file changed under the buffer
    assert found["applied"] is True and found["reason"] == "answered", output
    assert found["buffer"] == APP_AFTER and found["modified"] is True
    assert found["diskAfterTurn"] == APP_BEFORE
    assert found["diskAfterSave"] == APP_AFTER == (git_repo / "app.py").read_text()
    assert found["modifiedAfterSave"] is False
    # During the turn the agent's command saw the edit on disk.
    assert (tmp_path / "seen-by-command.py").read_text() == APP_AFTER
