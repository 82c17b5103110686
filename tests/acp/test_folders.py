"""The folder a session works in: `teachback acp` refuses the file system's root and the home folder
itself as a session's folder (the editor's cwd), unless `--workspace` or the user's own settings name
it; a project folder under home is a workspace as always."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.acp.raw_agent import RawAgent
from tests.acp.test_hostile import INVALID_PARAMS, started_agent


async def _agent(tmp_path: Path, home: Path, *args: str) -> RawAgent:
    """An initialized agent whose HOME is `home` (its model is never asked)."""
    return await started_agent(tmp_path, tmp_path, "unused.json", *args, HOME=str(home))


async def _new(agent: RawAgent, cwd: Path | str) -> dict:
    return await agent.request(f"new {cwd}", "session/new", {"cwd": str(cwd), "mcpServers": []})


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "proj").mkdir(parents=True)
    return home


@pytest.mark.timeout(90)
async def test_the_root_and_the_home_folder_are_refused_whatever_the_editor_says(tmp_path: Path, home: Path) -> None:
    (home / "teachback.toml").write_text(f'broad_workspaces = ["{home}"]\n')  # the workspace cannot widen itself
    (tmp_path / "to-home").symlink_to(home)
    agent = await _agent(tmp_path, home)
    try:
        for cwd, what in [
            ("/", "the file system's root"),
            (home, "your home folder"),
            (tmp_path / "to-home", "your home folder"),
        ]:
            refused = (await _new(agent, cwd))["error"]
            assert refused["code"] == INVALID_PARAMS
            details = refused["data"]["details"]
            assert f"is {what}" in details and "Open a project folder instead" in details
            assert "teachback acp --workspace" in details and "broad_workspaces" in details
        assert "sessionId" in (await _new(agent, home / "proj"))["result"]  # a project in it is fine
        assert await agent.close() == 0
    finally:
        await agent.close()


@pytest.mark.timeout(90)
async def test_the_command_line_allows_the_folder_it_names_and_no_other(tmp_path: Path, home: Path) -> None:
    agent = await _agent(tmp_path, home, "--workspace", str(home))
    try:
        assert "sessionId" in (await _new(agent, home))["result"]
        assert "the file system's root" in (await _new(agent, "/"))["error"]["data"]["details"]
        assert await agent.close() == 0
    finally:
        await agent.close()


@pytest.mark.timeout(90)
async def test_the_users_own_settings_allow_the_folder_they_name(
    tmp_path: Path, home: Path, teachback_home: Path
) -> None:
    (teachback_home / "teachback.toml").write_text(f'broad_workspaces = ["{home}"]\n')
    agent = await _agent(tmp_path, home)
    try:
        assert "sessionId" in (await _new(agent, home))["result"]
        assert "the file system's root" in (await _new(agent, "/"))["error"]["data"]["details"]
        assert await agent.close() == 0
    finally:
        await agent.close()
