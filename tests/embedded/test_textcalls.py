"""The text tool-calling mode: the parser over real and malformed replies, and message rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.protocol import textcalls
from agent.tools import default_toolbox

DATA = Path(__file__).parent / "data"
TOOLS = default_toolbox().schemas()
NAMES = [t["function"]["name"] for t in TOOLS]


def _corpus() -> list[tuple[str, dict]]:
    cases = [(case["note"], case) for case in json.loads((DATA / "handwritten_replies.json").read_text())]
    for number, line in enumerate((DATA / "smollm2_replies.jsonl").read_text().splitlines()):
        case = json.loads(line)
        cases.append((f"smollm2 {case['source']} {case['mode']} #{number}", case))
    return cases


CORPUS = _corpus()


@pytest.mark.parametrize("case", [c for _, c in CORPUS], ids=[name for name, _ in CORPUS])
def test_parser_over_corpus(case: dict) -> None:
    parsed = textcalls.parse_reply(case["reply"], NAMES)
    expect = case["expect"]
    if "calls" in expect:
        assert parsed.error is None
        got = [[c["function"]["name"], json.loads(c["function"]["arguments"])] for c in parsed.tool_calls]
        assert got == expect["calls"]
        assert all(c["type"] == "function" and c["id"].startswith("call_") for c in parsed.tool_calls)
        if "content" in expect:
            assert parsed.content == expect["content"]
    elif "error" in expect:
        assert parsed.tool_calls == []
        assert parsed.error is not None
        if isinstance(expect["error"], str):
            assert expect["error"] in parsed.error
        # The feedback restates the exact format and the real tool names.
        assert "<tool_call>" in parsed.error and "</tool_call>" in parsed.error
        assert "read_file, repo_map, run_command" in parsed.error
    else:
        assert parsed.error is None and parsed.tool_calls == []
        assert parsed.content == (case["reply"].strip() or None)


def test_corpus_holds_real_replies_of_every_kind() -> None:
    real = [c for name, c in CORPUS if name.startswith("smollm2")]
    kinds = {next(iter(c["expect"])) for c in real}
    assert len(real) >= 30 and kinds == {"calls", "error", "answer"}


def test_call_ids_are_unique_across_replies_and_the_same_when_parsed_again() -> None:
    reply = '<tool_call>{"name": "list_files", "arguments": {}}</tool_call>' * 2
    # The model adapter names a reply's calls by the length of the conversation they answer.
    ids = [c["id"] for step in range(3) for c in textcalls.parse_reply(reply, NAMES, f"call_{step}").tool_calls]
    assert len(ids) == len(set(ids)) == 6
    again = [c["id"] for step in range(3) for c in textcalls.parse_reply(reply, NAMES, f"call_{step}").tool_calls]
    assert again == ids


def test_rendered_call_parses_back_to_the_same_call() -> None:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {
            "name": "edit_file",
            "arguments": json.dumps({"path": "a.py", "old_text": "x = {1}", "new_text": "y\n"}),
        },
    }
    parsed = textcalls.parse_reply(textcalls.render_call(call), NAMES)
    assert parsed.error is None
    assert [json.loads(c["function"]["arguments"]) for c in parsed.tool_calls] == [
        json.loads(call["function"]["arguments"])
    ]


def test_tool_prompt_lists_every_tool_with_its_arguments() -> None:
    prompt = textcalls.tool_prompt(TOOLS)
    for name in NAMES:
        assert f"## {name}" in prompt
    assert "- path (string, required)" in prompt
    assert '{"name": "TOOL_NAME", "arguments": {"ARGUMENT_NAME": "VALUE"}}' in prompt
    assert "call finish" in prompt  # the toolbox has `finish`, so the prompt says how to end
    assert "$" not in prompt  # every template placeholder filled


def test_to_text_messages_renders_calls_and_results_as_text() -> None:
    messages = [
        {"role": "system", "content": "You are teachback."},
        {"role": "user", "content": "Fix app.py"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "app.py"}'},
                },
                {"id": "call_b", "type": "function", "function": {"name": "list_files", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "1| print('hi')"},
        {"role": "tool", "tool_call_id": "call_b", "content": "app.py"},
        {"role": "assistant", "content": "All good."},
    ]
    out = textcalls.to_text_messages(messages, TOOLS)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user", "assistant"]
    assert out[0]["content"].startswith("You are teachback.\n\n# Tools")
    assert "tool_calls" not in out[2]
    assert out[2]["content"].startswith("Looking.\n<tool_call>\n")
    assert textcalls.parse_reply(out[2]["content"], NAMES).tool_calls[1]["function"]["name"] == "list_files"
    results = out[3]["content"]
    assert '<tool_result name="read_file" id="call_a">\n1| print(\'hi\')\n</tool_result>' in results
    assert '<tool_result name="list_files" id="call_b">' in results
    assert messages[2]["tool_calls"][0]["id"] == "call_a"  # the input is not modified


def test_to_text_messages_keeps_user_turns_alternating_after_results() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "finish", "arguments": '{"summary": "x"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Finished: x"},
        {"role": "user", "content": "Now the next thing."},
    ]
    out = textcalls.to_text_messages(messages, TOOLS)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]  # system inserted
    assert out[0]["content"].startswith("# Tools")
    assert out[3]["content"].endswith("</tool_result>\n\nNow the next thing.")


def test_to_text_messages_without_tools_adds_no_prompt() -> None:
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
    assert textcalls.to_text_messages(messages, []) == messages


def test_grammar_kwargs_constrains_to_one_call_of_a_known_tool() -> None:
    kwargs = textcalls.grammar_kwargs(TOOLS)
    schema = kwargs["response_format"]["json_schema"]["schema"]
    assert kwargs["response_format"]["type"] == "json_schema"
    assert sorted(choice["properties"]["name"]["enum"][0] for choice in schema["anyOf"]) == sorted(NAMES)
    read = next(c for c in schema["anyOf"] if c["properties"]["name"]["enum"] == ["read_file"])
    assert read["properties"]["arguments"]["required"] == ["path"]


def test_grammar_converts_to_a_llama_cpp_grammar() -> None:
    llama_grammar = pytest.importorskip("llama_cpp.llama_grammar")
    schema = textcalls.grammar_kwargs(TOOLS)["response_format"]["json_schema"]["schema"]
    gbnf = llama_grammar.json_schema_to_gbnf(json.dumps(schema))
    assert all(f'\\"{name}\\"' in gbnf for name in NAMES)
