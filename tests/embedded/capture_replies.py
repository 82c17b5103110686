"""Capture replies from the embedded model for the parser's test corpus (run by hand, not by pytest):

    .venv/bin/python -m tests.embedded.capture_replies > tests/embedded/data/smollm2_replies.jsonl

Each line: the tool mode, the instruction, the seed and the model's raw reply, with the system
prompt and tool schemas the agent really sends. Labels are added by hand after review.
"""

from __future__ import annotations

import json
import sys

from agent.llm import load_litellm
from agent.protocol import textcalls
from agent.tools import default_toolbox

SYSTEM = (
    "You are teachback, a careful coding agent working in the repository at /tmp/textkit.\n"
    "You change code only through the tools you are given."
)
INSTRUCTIONS = (
    "Call read_file with path textkit/slug.py.",
    "slugify in textkit/slug.py must return a lowercase slug. Fix it.",
    "Run the tests with run_command: python -m pytest -q",
    "List the files in the project.",
)


def main() -> None:
    litellm = load_litellm()
    tools = default_toolbox().schemas()
    for mode in ("text", "grammar"):
        extra = textcalls.grammar_kwargs(tools) if mode == "grammar" else {}
        for instruction in INSTRUCTIONS:
            messages = textcalls.to_text_messages(
                [{"role": "system", "content": SYSTEM}, {"role": "user", "content": instruction}], tools
            )
            for seed in range(3):
                reply = litellm.completion(
                    model="local/smollm2", messages=messages, seed=seed, temperature=0.8, max_tokens=160, **extra
                )
                record = {
                    "mode": mode,
                    "instruction": instruction,
                    "seed": seed,
                    "reply": reply.choices[0].message.content,
                }
                sys.stdout.write(json.dumps(record) + "\n")
                sys.stdout.flush()


if __name__ == "__main__":
    main()
