"""teachback's exports of a recorded session feed TRL 1.16's trainers unchanged: one step each with
a finite loss, on the two-layer model with the embedded model's tokenizer and chat template
(`tiny_model_dir`: what a record must get through is TRL's loading, the template and the tokenizer,
and a forward and backward pass of SmolLM2's architecture, none of which depends on what the
weights know), and one step on the embedded model itself (SmolLM2-135M, converted from its GGUF).

The session is real (the agent loop, the scripted model, a git repository) and runs in the grammar
tool mode, as the embedded model does: the `auto` view of its exports is the text the model saw,
which SmolLM2's own chat template renders. The native view (tool calls, a `tools` column) is
trained with TRL's bundled Qwen2.5 template, a tool-aware ChatML template.
"""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path

import pytest

from agent.config import Settings
from agent.protocol import UserInput
from agent.runtime import open_session
from agent.toolkit import Toolbox
from agent.tools import ALL_TOOLS
from feedback_store import Recorder, open_store
from feedback_store.export.export import export
from tests.conftest import turn

pytest.importorskip("trl")
from tests.train.trl_harness import train_one_step  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

TRAINERS = {"sft": "sft", "dpo": "dpo", "trl-sdft": "sdft", "trl-sdpo": "sdpo"}
REAL_MODEL_FORMAT = "sft"  # the cheapest step of the four on the real model


def reply(name: str, **arguments: str) -> dict:
    return turn(content=json.dumps({"name": name, "arguments": arguments}))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import asyncio
    import subprocess

    root = tmp_path_factory.mktemp("session")
    repo = root / "proj"
    repo.mkdir()
    (repo / "app.py").write_text("def greet(name):\n    return 'Hello, ' + name\n")
    subprocess.run(
        "git init -q -b main && git add -A && git -c user.email=a@b -c user.name=a commit -qm init",
        shell=True,
        cwd=repo,
        check=True,
    )
    script = root / "script.json"
    script.write_text(
        json.dumps(
            [
                reply("open_file", path="app.py"),  # unknown tool
                reply("read_file", path="app.py"),
                reply(
                    "edit_file", path="app.py", old_text="return 'Hi, ' + name", new_text="return f'Hi, {name}'"
                ),  # no match
                reply(
                    "edit_file", path="app.py", old_text="return 'Hello, ' + name", new_text="return f'Hello, {name}'"
                ),
                reply("finish", summary="greet uses an f-string"),
            ]
        )
    )
    db = root / "feedback.db"

    async def run() -> None:
        store = open_store(db)
        settings = Settings(model=f"scripted/{script}", tool_mode="grammar", approval="full-auto", repo_map_tokens=0)
        session = open_session(repo, settings, frontend="test")
        # The three tools this session uses: shorter prompts keep each training step to seconds.
        session.toolbox = Toolbox([t for t in ALL_TOOLS if t.name in ("read_file", "edit_file", "finish")])
        session.subscribe(Recorder(store))
        await session.run(UserInput(text="Make greet use an f-string."))
        store.close()

    asyncio.run(run())
    return db


def trains_one_step_with_the_models_own_template(fmt: str, recorded: Path, model_dir: Path, folder: Path) -> float:
    out = folder / f"{fmt}.jsonl"
    result = export([recorded], fmt, out, compact_tools=True, tokenizer="estimate")
    assert result.records == 2 and result.paths == [out]
    first = json.loads(out.read_text().splitlines()[0])
    assert first["prompt"][0]["role"] == "system" and "tool_call" in first["prompt"][0]["content"]
    return train_one_step(TRAINERS[fmt], out, model_dir)


@pytest.mark.parametrize("fmt", sorted(TRAINERS))
def test_each_export_trains_one_step_with_the_models_own_template(
    fmt: str, recorded: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    assert math.isfinite(trains_one_step_with_the_models_own_template(fmt, recorded, tiny_model_dir, tmp_path))


@pytest.mark.real_model
def test_the_embedded_model_trains_a_step_on_an_export(
    recorded: Path, embedded_model_dir: Path, tmp_path: Path
) -> None:
    loss = trains_one_step_with_the_models_own_template(REAL_MODEL_FORMAT, recorded, embedded_model_dir, tmp_path)
    assert math.isfinite(loss) and loss > 0


@pytest.mark.parametrize("fmt", ["sft", "dpo"])
def test_native_exports_train_one_step_with_a_tool_aware_template(
    fmt: str, recorded: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / f"{fmt}.jsonl"
    export([recorded], fmt, out, template="native", compact_tools=True, tokenizer="estimate")
    first = json.loads(out.read_text().splitlines()[0])
    assert json.loads(first["tools"]) and first["prompt"][-1]["role"] in ("user", "tool")
    template = resources.files("trl").joinpath("chat_templates", "qwen2_5.jinja").read_text()
    loss = train_one_step(TRAINERS[fmt], out, tiny_model_dir, chat_template=template)
    assert math.isfinite(loss) and loss > 0
