"""Editor changes reach the repo map off the event loop, one parse per burst."""

from __future__ import annotations

import asyncio

from agent.repomap import RepoMap
from lsp_server.mapfeed import MapFeeder


async def test_buffer_changes_update_the_map_without_a_rescan(git_repo):
    repo_map = RepoMap(git_repo)
    assert "def multiply" not in repo_map.render(tokens=2000)
    feeder = MapFeeder(repo_map)
    for n in range(5):  # a burst of keystrokes
        feeder.set("util.py", f"def add(a, b):\n    return a + b\n\n\ndef multiply(a, b, c={n}):\n    return a * b\n")
    await asyncio.wait_for(feeder.drained(), 10)
    assert repo_map.parsed_files == 1
    rendered = repo_map.render(tokens=2000)
    assert "def multiply(a, b, c=4)" in rendered and "def sub" not in rendered
    feeder.remove("util.py")  # closed without saving: back to the disk's version
    await asyncio.wait_for(feeder.drained(), 10)
    rendered = repo_map.render(tokens=2000)
    assert "def multiply" not in rendered and "def sub(a, b)" in rendered
