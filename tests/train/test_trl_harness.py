"""TRL's trainers take hand-made rows in the shapes teachback exports, loaded unchanged.

Two views of a recorded turn:
- rendered: what the embedded model saw. Tool schemas are text in the system prompt, calls are
  `<tool_call>` blocks in the assistant's `content`, tool results come back as a user message.
  Only strings, so SmolLM2's own chat template renders it, token for token as at inference, and a
  prompt cut before a failed turn ends with a user turn, as TRL's self-distillation trainers require.
- canonical: the OpenAI / Hugging Face shape (`tool_calls` with `arguments` as a dict, `role:
  tool` results, a `tools` column of JSON schemas), for models with native tool calling. SFT and
  DPO pass `tools` to the chat template; SmolLM2's template ignores both `tools` and `tool_calls`,
  so these rows need a tool-aware template (here TRL's bundled Qwen2.5 one, also ChatML).

The steps run on the two-layer model with the embedded model's tokenizer and chat template
(`tiny_model_dir`): what a row must get through is TRL's loading, the template's rendering, the
tokenizer and one forward and backward pass of a Llama-architecture model, none of which depends on
what the weights know. The embedded model itself trains on exported files in test_exports_train.py.
"""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from tests.train.trl_harness import train_one_step

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SYSTEM = (
    'Call a tool by writing <tool_call>{"name": ..., "arguments": {...}}</tool_call>. '
    "Tools: read_file(path), edit_file(path, old_text, new_text)."
)
TASK = "Rename greet to welcome in app.py."
READ_WRONG = '<tool_call>\n{"name": "read_file", "arguments": {"path": "ap.py"}}\n</tool_call>'
READ_RIGHT = '<tool_call>\n{"name": "read_file", "arguments": {"path": "app.py"}}\n</tool_call>'
EDIT_WRONG = (
    '<tool_call>\n{"name": "edit_file", "arguments": {"path": "app.py", "old_text": "def greeting(", '
    '"new_text": "def welcome("}}\n</tool_call>'
)
EDIT_RIGHT = EDIT_WRONG.replace("greeting", "greet")
RESULT = '<tool_result name="read_file" id="call_1">\ndef greet(name):\n    return "Hi " + name\n</tool_result>'
FEEDBACK_PATH = "read_file failed: no file ap.py. Files: app.py, util.py. Read app.py."
FEEDBACK_EDIT = "edit_file failed: old_text 'def greeting(' is not in app.py; the closest line is 'def greet(name):'."


def system() -> dict[str, str]:
    return {"role": "system", "content": SYSTEM}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "edit_file",
            "description": "Replace text in a file.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "old_text": {"type": "string"},
                    "new_text": {"type": "string"},
                },
                "required": ["path", "old_text", "new_text"],
            },
        },
    },
]

FIRST_TURN = [system(), user(TASK)]  # the failed turn was the first reply
AFTER_READ = [system(), user(TASK), assistant(READ_RIGHT), user(RESULT)]  # ...or came after a read

RENDERED = {
    "sft": [
        {"prompt": FIRST_TURN, "completion": [assistant(READ_RIGHT)]},
        {"prompt": AFTER_READ, "completion": [assistant(EDIT_RIGHT)]},
    ],
    "dpo": [
        {"prompt": FIRST_TURN, "chosen": [assistant(READ_RIGHT)], "rejected": [assistant(READ_WRONG)]},
        {"prompt": AFTER_READ, "chosen": [assistant(EDIT_RIGHT)], "rejected": [assistant(EDIT_WRONG)]},
    ],
    # The self-distillation trainers never render `tools`; SDPO hands every column to its reward
    # functions, which need the schemas to judge a call.
    "sdft": [
        {"prompt": FIRST_TURN, "privileged_context": FEEDBACK_PATH, "tools": TOOLS},
        {"prompt": AFTER_READ, "privileged_context": FEEDBACK_EDIT, "tools": TOOLS},
    ],
}
RENDERED["sdpo"] = RENDERED["sdft"]


def call(name: str, arguments: Any, call_id: str = "call_1") -> dict[str, Any]:
    """An assistant turn with one tool call; `content` is "" (never null: templates fail on it)."""
    tool_call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
    return {"role": "assistant", "content": "", "tool_calls": [tool_call]}


READ_CALL = call("read_file", {"path": "app.py"})
EDIT_ARGS = {"path": "app.py", "old_text": "def greet(", "new_text": "def welcome("}
CANONICAL_PREFIX = [
    {"role": "system", "content": "You are a coding agent."},
    user(TASK),
    READ_CALL,
    {"role": "tool", "tool_call_id": "call_1", "name": "read_file", "content": "def greet(name):\n    return 1\n"},
]
CANONICAL = {
    "sft": [
        {"prompt": CANONICAL_PREFIX[:2], "completion": [READ_CALL], "tools": TOOLS},
        {"prompt": CANONICAL_PREFIX, "completion": [call("edit_file", EDIT_ARGS, "call_2")], "tools": TOOLS},
    ],
    "dpo": [
        {
            "prompt": CANONICAL_PREFIX[:2],
            "chosen": [READ_CALL],
            "rejected": [call("read_file", {"path": "ap.py"})],
            "tools": TOOLS,
        },
        {
            "prompt": CANONICAL_PREFIX,
            "chosen": [call("edit_file", EDIT_ARGS, "call_2")],
            # a malformed call cannot be a dict: its raw text stays a string beside dict rows
            "rejected": [call("edit_file", '{"path": "app.py", "old_text": def greet(', "call_2")],
            "tools": TOOLS,
        },
    ],
}


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def qwen_template() -> str:
    return resources.files("trl").joinpath("chat_templates", "qwen2_5.jinja").read_text()


@pytest.mark.parametrize("kind", ["sft", "dpo", "sdft", "sdpo"])
def test_rendered_rows_train_one_step_with_the_models_own_template(
    kind: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    data = write_jsonl(tmp_path / f"{kind}.jsonl", RENDERED[kind])
    loss = train_one_step(kind, data, tiny_model_dir)
    assert math.isfinite(loss)


@pytest.mark.parametrize("kind", ["sft", "dpo"])
def test_canonical_rows_with_tools_train_one_step_with_a_tool_aware_template(
    kind: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    data = write_jsonl(tmp_path / f"{kind}.jsonl", CANONICAL[kind])
    loss = train_one_step(kind, data, tiny_model_dir, chat_template=qwen_template())
    assert math.isfinite(loss) and loss > 0


def test_the_models_own_template_drops_tool_calls_and_schemas(embedded_model_dir: Path) -> None:
    """Why canonical rows need another template for SmolLM2: its own renders neither, silently."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir, local_files_only=True)
    row = CANONICAL["sft"][1]
    conversation = row["prompt"] + row["completion"]
    own = tokenizer.apply_chat_template(conversation, tools=row["tools"], tokenize=False)
    assert "read_file" not in own and "edit_file" not in own
    tool_aware = tokenizer.apply_chat_template(
        conversation, tools=row["tools"], tokenize=False, chat_template=qwen_template()
    )
    assert f'{{"name": "edit_file", "arguments": {json.dumps(EDIT_ARGS)}}}' in tool_aware  # a dict, encoded once
    assert '"name": "read_file", "description": "Read a file."' in tool_aware
