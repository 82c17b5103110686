"""The embedded model converted to a Hugging Face directory once per test run.

The autouse TEACHBACK_HOME fixture gives every test its own home, so the converted model lives in a
directory of the run instead and tests receive its path explicitly. Under pytest-xdist every worker
shares that directory: the first to need a model builds it under a file lock, the others wait for it
and load the same files (a conversion costs about a minute of CPU on these machines)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

# OpenMP threads that spin while waiting made a training step 4x slower on two cores shared with
# other processes (74-100 s against 23 s for one forward and backward pass). torch's OpenMP
# runtime reads this when torch is first imported, which no module outside trainer/ does.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def built_once_per_run(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Path]) -> Path:
    """`build(folder)` run by the first worker of this run to get here; the others get its result.

    Each model has a folder of its own that holds only it (tests check that a conversion leaves
    nothing else beside the model), with the lock outside."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # each worker's base is a child of the run's own
        root = root.parent
    folder = root / f"shared-{name}"
    with FileLock(root / f"shared-{name}.lock"):
        folder.mkdir(exist_ok=True)
        return build(folder)


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
    return built_once_per_run(tmp_path_factory, "embedded", lambda folder: convert_gguf(gguf, folder / EMBEDDED))


@pytest.fixture(scope="session")
def tiny_model_dir(embedded_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised two-layer model with the embedded model's tokenizer and chat template,
    for the tests of the trainer's mechanics (seeds, resume, processes, objectives, caches): what
    they check is that the same arithmetic gives the same numbers, not what the model knows, and
    this model runs a step in a fraction of the time. Tests of what training does use the real one."""
    return built_once_per_run(tmp_path_factory, "tiny", lambda folder: _tiny_model(embedded_model_dir, folder / "tiny"))


def _tiny_model(embedded_model_dir: Path, out: Path) -> Path:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    if out.is_dir():  # built by another worker of this run
        return out
    staging = out.with_name(f".{out.name}-staging")  # renamed into place whole, as a conversion is
    shutil.rmtree(staging, ignore_errors=True)
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
    AutoModelForCausalLM.from_config(config).save_pretrained(staging)
    for source in embedded_model_dir.iterdir():  # the tokenizer's files and the generation settings
        if source.is_file() and not (staging / source.name).exists() and source.suffix != ".safetensors":
            shutil.copy2(source, staging / source.name)
    staging.rename(out)
    return out
