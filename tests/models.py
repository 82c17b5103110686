"""Models for tests, each built once per test run: the embedded model converted to a Hugging Face
directory, a two-layer model with its tokenizer, and that model as a GGUF file for llama.cpp.

The autouse TEACHBACK_HOME fixture gives every test its own home, so the converted model lives in a
directory of the run instead and tests receive its path explicitly. Under pytest-xdist every worker
shares that directory: the first to need a model builds it under a file lock, the others wait for it
and load the same files (a conversion costs about a minute of CPU on these machines). tests/conftest.py
makes the fixtures visible to every test directory."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


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


@pytest.fixture(scope="session")
def tiny_gguf(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`tiny_model_dir` as a GGUF file, for the tests of what runs on llama.cpp (seeded replay,
    labels, task runs, served adapters) where the embedded model's knowledge does not matter: it has
    the embedded model's tokenizer and chat template, so prompts, grammars and token ids are the
    embedded model's, and a prompt costs a hundredth of the time. Its logits are close to the Hugging
    Face model's, not equal: adapters trained on one and served on the other run, not agree."""
    from agent.providers.llama_engine import model_path
    from trainer.weights import EMBEDDED

    embedded = model_path(EMBEDDED)
    return built_once_per_run(
        tmp_path_factory, "tiny-gguf", lambda folder: write_tiny_gguf(tiny_model_dir, embedded, folder / "tiny.gguf")
    )


def _permute(weights, heads: int):  # type: ignore[no-untyped-def]
    """llama.cpp's convert_hf_to_gguf `LlamaModel.permute`."""
    return (
        weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def write_tiny_gguf(model_dir: Path, embedded_gguf: Path, out: Path) -> Path:
    """`out`, the Hugging Face llama model in `model_dir` as llama.cpp's convert_hf_to_gguf writes it:
    f32 tensors under the `gguf` package's names, query and key rows permuted for the rotary layout,
    and the tokenizer's metadata copied from `embedded_gguf`. Written whole, then renamed."""
    import gguf
    import numpy as np
    from safetensors.numpy import load_file

    if out.is_file():
        return out
    config = json.loads((model_dir / "config.json").read_text())
    weights = {}
    for path in sorted(model_dir.glob("*.safetensors")):
        weights.update(load_file(str(path)))
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    staging = out.with_name(f".{out.name}-staging")
    writer = gguf.GGUFWriter(str(staging), "llama")
    writer.add_name("teachback tiny test model")
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(float(config.get("rope_theta", 10000.0)))
    writer.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
    writer.add_vocab_size(config["vocab_size"])
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    reader = gguf.GGUFReader(str(embedded_gguf))
    for key, field in reader.fields.items():
        if key.startswith("tokenizer."):
            sub_type = field.types[1] if len(field.types) > 1 else None
            writer.add_key_value(key, field.contents(), field.types[0], sub_type)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config["num_hidden_layers"])
    for name, tensor in weights.items():
        if name == "lm_head.weight" and config.get("tie_word_embeddings"):
            continue
        target = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if target is None:
            raise ValueError(f"no GGUF name for {name}")
        data = tensor.astype(np.float32)
        if name.endswith("q_proj.weight"):
            data = _permute(data, heads)
        elif name.endswith("k_proj.weight"):
            data = _permute(data, kv_heads)
        writer.add_tensor(target, np.ascontiguousarray(data))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    staging.rename(out)
    return out
