"""The agent sees the repo map twice: in its system prompt, and through the repo_map tool."""

from __future__ import annotations

from agent.protocol import SessionStarted, ToolCallFinished
from tests.conftest import call, turn


async def test_system_prompt_has_a_map_centred_on_the_instruction(git_repo, script, run_agent):
    run = await run_agent(
        git_repo, script(turn(call("repo_map", {"focus": "util.py"}))), instruction="make sub handle floats"
    )
    prompt = run.of(SessionStarted)[0].system_prompt
    assert "A map of the repository's most relevant definitions" in prompt
    assert "def sub(a, b)" in prompt and "util.py" in prompt
    result = run.of(ToolCallFinished)[0]
    assert result.ok and "def add(a, b)" in result.result


async def test_map_can_be_turned_off(git_repo, script, run_agent):
    run = await run_agent(git_repo, script(), repo_map_tokens=0)
    assert "A map of the repository" not in run.of(SessionStarted)[0].system_prompt
