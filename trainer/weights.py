"""Base weights as a local Hugging Face model directory, never downloaded from a hub.

The embedded model ships as a quantized GGUF file. transformers reads GGUF (dequantizing it), but
loading that way takes about a minute and `save_pretrained` refuses a GGUF-loaded model, so the
first use rebuilds the model from its config without the quantization entry, copies the state
dict in, and caches safetensors plus the tokenizer under `$TEACHBACK_HOME/models/<name>/`; later
loads take well under a second.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from agent.config import teachback_home
from agent.providers.llama_engine import PACKAGED_MODELS, LocalModelError, model_path
from common.environment import environment

log = logging.getLogger(__name__)

EMBEDDED = "smollm2"
_OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


class WeightsError(Exception):
    """A base model that cannot be used; the message says how to fix it."""


def models_dir() -> Path:
    return teachback_home() / "models"


def resolve_base(base: str | None) -> Path:
    """A local Hugging Face model directory for `base`.

    None (or `smollm2`, `local/smollm2`): the embedded model, converted from its GGUF once. A
    directory with a `config.json`: used as is. A `.gguf` file: converted once, like the embedded
    one."""
    if base is None:
        base = EMBEDDED
    given = Path(base).expanduser()
    if given.is_dir():
        if not (given / "config.json").is_file():
            raise WeightsError(
                f"{given} is not a Hugging Face model directory (no config.json): pass a directory "
                "written by save_pretrained, a .gguf file, or nothing for the embedded model."
            )
        return given
    name = base.removeprefix("local/")
    try:
        gguf = model_path(name)
    except LocalModelError as exc:
        raise WeightsError(f"{exc} A --base may also be a local Hugging Face model directory.") from exc
    return convert_gguf(gguf, models_dir() / _cache_name(name, gguf))


def convert_gguf(gguf: Path, out: Path) -> Path:
    """Convert `gguf` to safetensors and a tokenizer in `out`, unless `out` already holds them.

    Written to a temporary sibling directory and renamed into place, so an interrupted or
    concurrent conversion never leaves a half-written model where a later load would find it."""
    if (out / "config.json").is_file():
        return out
    if out.exists():
        raise WeightsError(f"{out} exists but holds no converted model; remove it and retry.")
    out.parent.mkdir(parents=True, exist_ok=True)
    log.info("converting %s to a Hugging Face model in %s (once; about a minute)", gguf.name, out)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        _write_converted(gguf, staging)
        staging.rename(out)
    except ValueError as exc:  # transformers' word for an unreadable or unsupported GGUF file
        raise WeightsError(
            f"cannot convert {gguf}: {exc} Pass a GGUF file of a model transformers can read, "
            "or a Hugging Face model directory."
        ) from exc
    except OSError as exc:
        if not (out / "config.json").is_file():  # not a concurrent conversion that won the rename
            raise WeightsError(f"cannot place the converted model in {out} ({exc}); remove {out} and retry.") from exc
        log.info("another process converted %s first; using its copy", gguf.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def _write_converted(gguf: Path, target: Path) -> None:
    with offline():
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        source = {"pretrained_model_name_or_path": gguf.parent, "gguf_file": gguf.name, "local_files_only": True}
        tokenizer = AutoTokenizer.from_pretrained(**source)
        loaded = AutoModelForCausalLM.from_pretrained(**source, dtype=torch.float32)
        config = loaded.config
        del config.quantization_config  # the weights below are plain float32 tensors
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(loaded.state_dict())
        model.generation_config = loaded.generation_config
        model.save_pretrained(target)
        tokenizer.save_pretrained(target)


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """Hub access off while loading. huggingface_hub reads these variables once, when first
    imported, so every loader here also passes local_files_only=True."""
    with environment(_OFFLINE_ENV):
        yield


def _cache_name(name: str, gguf: Path) -> str:
    """The packaged model's own name; for any other GGUF file, its stem and a hash of where it
    lies, its size and its modification time (a replaced file converts again)."""
    if name in PACKAGED_MODELS:
        return name
    stat = gguf.resolve().stat()
    key = f"{gguf.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()
    return f"{gguf.stem}-{hashlib.sha256(key).hexdigest()[:12]}"
