"""The embedded model converted to a Hugging Face directory once per test session.

The autouse TEACHBACK_HOME fixture gives every test its own home, so the converted model lives in a
session directory instead and tests receive its path explicitly."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# OpenMP threads that spin while waiting made a training step 4x slower on two cores shared with
# other processes (74-100 s against 23 s for one forward and backward pass). torch's OpenMP
# runtime reads this when torch is first imported, which no module outside trainer/ does.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(scope="session")
def embedded_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from agent.providers.llama_engine import LocalModelError, model_path
    from trainer.weights import EMBEDDED, convert_gguf

    try:
        gguf = model_path(EMBEDDED)
    except LocalModelError as exc:
        pytest.skip(str(exc))
    return convert_gguf(gguf, tmp_path_factory.mktemp("models") / EMBEDDED)


@pytest.fixture(scope="session")
def tiny_model_dir(embedded_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised two-layer model with the embedded model's tokenizer and chat template,
    for the tests of the trainer's mechanics (seeds, resume, processes, objectives, caches): what
    they check is that the same arithmetic gives the same numbers, not what the model knows, and
    this model runs a step in a fraction of the time. Tests of what training does use the real one."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    out = tmp_path_factory.mktemp("models") / "tiny"
    config = AutoConfig.from_pretrained(embedded_model_dir, local_files_only=True)
    config.update(
        {
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            # Weights of the default scale (0.02) give so flat a distribution that student and
            # teacher agree to 1e-9: the losses are rounding noise, which Adam turns into full-size
            # steps, so two runs of the same arithmetic on different CPUs part at the second step.
            "initializer_range": 0.3,
        }
    )
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(out)
    for source in embedded_model_dir.iterdir():  # the tokenizer's files and the generation settings
        if source.is_file() and not (out / source.name).exists() and source.suffix != ".safetensors":
            shutil.copy2(source, out / source.name)
    return out
