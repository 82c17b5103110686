"""A real Emacs (batch mode, eglot) drives `teachback lsp`: the agent's edit to an open file
arrives in the buffer without a question, and the commands the agent runs saw it on disk."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.lsp.editor_runs import APP_AFTER, APP_BEFORE, SCRIPTS, require, run_editor, turn_env


@pytest.mark.timeout(240)
def test_eglot_gets_the_agents_edit_in_its_buffer_without_a_question(git_repo: Path, tmp_path: Path) -> None:
    emacs = require("emacs", "emacs-nox elpa-eglot")
    # Not -Q: Debian's site start-up puts the elpa-eglot package on the load path.
    has_eglot = subprocess.run([emacs, "--batch", "--eval", "(require 'eglot)"], capture_output=True, timeout=60)
    if has_eglot.returncode != 0:
        pytest.skip("eglot is not installed for this Emacs (28 has none built in): `apt-get install -y elpa-eglot`")
    argv = [emacs, "--batch", "-l", str(SCRIPTS / "eglot_turn.el")]
    found = run_editor(argv, tmp_path, turn_env(git_repo, tmp_path), tmp_path / "findings.json")
    output = found.pop("output")

    assert found.get("error") is None, output
    assert found["questions"] == [], output  # no "changed on disk" question, no confirmation
    assert found["applied"] is True and found["reason"] == "answered", output
    assert found["buffer"] == APP_AFTER and found["modified"] is True
    # The file is as Emacs last saw it, so Emacs has nothing to ask about; saving writes the edit.
    assert found["visitedFileCurrent"] is True and found["diskAfterTurn"] == APP_BEFORE
    assert found["diskAfterSave"] == APP_AFTER == (git_repo / "app.py").read_text()
    assert found["modifiedAfterSave"] is None
    # During the turn the agent's command saw the edit on disk.
    assert (tmp_path / "seen-by-command.py").read_text() == APP_AFTER
