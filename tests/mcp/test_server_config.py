"""Reading [mcp_servers.NAME] tables and .mcp.json files: what each key means, and an entry that
cannot be used kept with a problem that says how to fix it (the other servers still start)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.config import load_settings
from agent.mcp import trust
from agent.mcp.config import fingerprint, load_servers, workspace_definitions

TOML = """
model = "scripted/x.json"
allow_tools = ["mcp__github__*"]

[mcp_servers.github]
command = "github-mcp"
args = ["stdio", "--read-only"]
env = { GITHUB_TOKEN = "${GH_TOKEN}" }
cwd = "tools"
startup_timeout = 5
call_timeout = 60

[mcp_servers.web]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer ${WEB_TOKEN:-none}" }
"""


def test_user_servers_with_their_keys_and_environment_values(teachback_home, tmp_path):
    (teachback_home / "teachback.toml").write_text(TOML)
    settings = load_settings(tmp_path)  # the [mcp_servers] tables are not settings
    assert settings.allow_tools == ("mcp__github__*",)
    servers = {s.name: s for s in load_servers(tmp_path, env={"GH_TOKEN": "t0k"}).servers}
    github, web = servers["github"], servers["web"]
    assert (github.command, github.args, dict(github.env)) == (
        "github-mcp",
        ("stdio", "--read-only"),
        {"GITHUB_TOKEN": "t0k"},
    )
    assert github.cwd == str((tmp_path / "tools").resolve())
    assert (github.startup_timeout, github.call_timeout, github.problem) == (5.0, 60.0, None)
    assert (web.url, dict(web.headers), web.problem) == (
        "https://mcp.example.com/mcp",
        {"Authorization": "Bearer none"},
        None,
    )


def test_an_unset_variable_is_a_problem_of_that_server_only(teachback_home, tmp_path):
    (teachback_home / "teachback.toml").write_text(TOML)
    servers = {s.name: s for s in load_servers(tmp_path, env={}).servers}
    assert "${GH_TOKEN}, which is not set in the environment" in servers["github"].problem
    assert "${GH_TOKEN:-value}" in servers["github"].problem
    assert servers["web"].problem is None


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ('[mcp_servers.x]\ncommand = "a"\nurl = "http://h"\n', "give either command"),
        ("[mcp_servers.x]\nargs = []\n", "give either command"),
        ('[mcp_servers.x]\ncommand = "a"\nport = 3\n', "unknown key(s) port; known: command, args"),
        ('[mcp_servers.x]\ncommand = "a"\nargs = "--flag"\n', "args must be a list of strings"),
        ('[mcp_servers.x]\ncommand = "a"\ncall_timeout = 0\n', "call_timeout must be a number of seconds above 0"),
        ('[mcp_servers."a.b"]\ncommand = "a"\n', "letters, digits, '_' or '-'"),
        ("[mcp_servers]\nx = 3\n", "must be a table of settings"),
    ],
)
def test_an_entry_that_cannot_be_used_says_why(teachback_home, tmp_path, table, problem):
    (teachback_home / "teachback.toml").write_text(table)
    [server] = load_servers(tmp_path).servers
    assert server.problem is not None and problem in server.problem, server.problem
    assert server.source == str(teachback_home / "teachback.toml")


def test_claude_codes_format_once_allowed(tmp_path):
    servers = {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]},
        "api": {"type": "http", "url": "http://localhost:9000/mcp", "headers": {"X-Key": "${KEY:-k}"}},
        "old": {"type": "sse", "url": "http://localhost:9001/sse"},
    }
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    assert load_servers(tmp_path).withheld.names == ("api", "files", "old")
    trust.allow(tmp_path, fingerprint(workspace_definitions(tmp_path)))
    found = load_servers(tmp_path)
    assert found.withheld is None
    by_name = {s.name: s for s in found.servers}
    assert by_name["files"].args == ("-y", "@modelcontextprotocol/server-filesystem", ".")
    assert by_name["api"].url == "http://localhost:9000/mcp" and by_name["api"].headers == {"X-Key": "k"}
    assert "SSE transport" in by_name["old"].problem


def test_a_broken_mcp_json_is_reported_not_raised(tmp_path):
    (tmp_path / ".mcp.json").write_text("{not json")
    withheld = load_servers(tmp_path).withheld
    assert withheld.files == (".mcp.json",) and withheld.names == ()
    trust.allow(tmp_path, fingerprint(workspace_definitions(tmp_path)))
    [server] = load_servers(tmp_path).servers
    assert "not valid JSON" in server.problem


def test_the_allowed_list_is_the_users_and_survives_a_bad_file(teachback_home, tmp_path: Path):
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"a": {"command": "x"}}}))
    trust.allow(tmp_path, fingerprint(workspace_definitions(tmp_path)))
    assert json.loads((teachback_home / trust.ALLOWED_FILE).read_text())["workspaces"] == {
        str(tmp_path.resolve()): fingerprint(workspace_definitions(tmp_path))
    }
    (teachback_home / trust.ALLOWED_FILE).write_text("garbage")
    assert load_servers(tmp_path).withheld is not None  # nothing is allowed when the list cannot be read
