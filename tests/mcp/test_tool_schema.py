"""A server tool as the model sees it (names, schema, argument checks, the text of each kind of
content), built from the `mcp` library's own types."""

from __future__ import annotations

import mcp.types as types

from agent.mcp.tools import MAX_NAME, McpTool, result_text
from agent.toolkit import Toolbox, ToolResult
from agent.tools import ALL_TOOLS


async def _never(tool: McpTool, arguments: dict) -> ToolResult:
    raise AssertionError("not called here")


def listed(name: str, schema: dict | None = None, description: str | None = "Does a thing.") -> types.Tool:
    return types.Tool(name=name, description=description, input_schema=schema or {"type": "object"})


def test_names_fit_function_name_rules_and_stay_unique():
    taken: set[str] = set()
    plain = McpTool.from_listing("github", listed("create_issue"), taken, _never)
    dotted = McpTool.from_listing("github", listed("issues.list all"), taken, _never)
    long = McpTool.from_listing("github", listed("x" * 100), taken, _never)
    clash = McpTool.from_listing("github", listed("issues_list_all"), taken, _never)
    assert plain.name == "mcp__github__create_issue"
    assert dotted.name == "mcp__github__issues_list_all" and dotted.remote_name == "issues.list all"
    assert len(long.name) == MAX_NAME and long.name.startswith("mcp__github__xxx")
    assert clash.name != dotted.name and clash.name.startswith("mcp__github__issues_list_all_")
    assert plain.schema()["function"]["parameters"] == {"type": "object", "properties": {}}


def test_arguments_are_checked_against_the_servers_schema():
    schema = {
        "type": "object",
        "properties": {
            "repo": {"type": "string", "description": "owner/name"},
            "labels": {"type": "array", "items": {"type": "string"}},
            "state": {"enum": ["open", "closed"]},
        },
        "required": ["repo"],
        "additionalProperties": False,
    }
    tool = McpTool.from_listing("github", listed("list_issues", schema), set(), _never)
    assert tool.check({"repo": "a/b", "labels": ["bug"], "state": "open"}) == []
    problems = tool.check({"labels": ["bug", 3], "state": "stale", "extra": 1})
    assert "'labels.1': 3 is not of type 'string'" in problems
    assert "'state': 'stale' is not one of ['open', 'closed']" in problems
    assert any("'repo' is a required property" in p for p in problems)
    assert any("('extra' was unexpected)" in p for p in problems)
    assert tool.check({"repo": "a/\ud800"})[0].startswith("'repo': holds a lone UTF-16 surrogate")
    assert tool.signature_text() == (
        'mcp__github__list_issues(repo: string, labels: array of string?, state: one of "open", "closed"?)'
    )
    assert "- repo (string): owner/name" in tool.parameters_text()


def test_the_list_of_tools_for_an_unknown_name_keeps_each_description_to_a_line():
    long = McpTool.from_listing("docs", listed("search", description="Search.\n" + "Details. " * 500), set(), _never)
    refused = Toolbox(ALL_TOOLS).extended([long]).prepare("mcp__docs__serch", "{}")
    assert isinstance(refused, ToolResult) and refused.error_kind == "unknown_tool"
    assert "- mcp__docs__search(): Search.\n" in refused.output + "\n" and "Details." not in refused.output


def test_each_kind_of_content_as_text():
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="first"),
            types.ImageContent(type="image", data="AAAA", mime_type="image/jpeg"),
            types.AudioContent(type="audio", data="AAAAAAAA", mime_type="audio/wav"),
            types.ResourceLink(type="resource_link", uri="file:///r.txt", name="r.txt", mime_type="text/plain"),
            types.EmbeddedResource(
                type="resource", resource=types.TextResourceContents(uri="file:///a.md", text="# A")
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(uri="file:///b.bin", blob="AAAA", mime_type="application/zip"),
            ),
        ]
    )
    assert result_text(result).split("\n") == [
        "first",
        "[image: image/jpeg, 3 bytes; not shown to you]",
        "[audio: audio/wav, 6 bytes; not shown to you]",
        "[resource link: file:///r.txt (r.txt, text/plain)]",
        "[resource file:///a.md]",
        "# A",
        "[resource file:///b.bin: application/zip, 3 bytes; not shown to you]",
    ]
    structured = types.CallToolResult(content=[], structured_content={"n": 1})
    assert result_text(structured) == '{\n  "n": 1\n}'
    assert result_text(types.CallToolResult(content=[])) == "(the tool returned no content)"
    huge = result_text(types.CallToolResult(content=[types.TextContent(type="text", text="y" * 50_000)]))
    assert len(huge) < 13_000 and "characters cut" in huge
