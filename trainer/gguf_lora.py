"""A peft LoRA adapter as a GGUF LoRA adapter, the file llama.cpp (and llama-cpp-python's
`lora_path`) loads on top of a quantized base model.

The layout is the one llama.cpp's `convert_lora_to_gguf.py` writes: `general.type = adapter`,
`adapter.type = lora`, `adapter.lora.alpha` (float32), the base model's architecture, and for each
adapted weight `<base tensor name>.lora_a` (numpy shape rank x in) and `.lora_b` (out x rank), f32.
llama.cpp scales a pair by alpha / rank, as peft does for plain LoRA; where peft scales otherwise
(rsLoRA's alpha / sqrt(rank), per-module `rank_pattern` / `alpha_pattern`) the difference is folded
into lora_b, so the served product is peft's exactly.

Tensor names come from the `gguf` package's map of Hugging Face names to GGUF names and are checked
against the base GGUF file's own tensors and shapes, so an adapter trained on another model fails
here, with the reason, rather than in llama.cpp. For the llama architecture, the conversion to
GGUF permutes the rows of the query and key projections (rotary embedding layout); lora_b of those
projections gets the same permutation.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ADAPTER_GGUF = "adapter.gguf"  # the converted file's name inside an adapter directory
PEFT_CONFIG = "adapter_config.json"
PEFT_WEIGHTS = "adapter_model.safetensors"
_PEFT_PREFIX = "base_model.model."
_PERMUTED_QK = {"llama"}  # architectures whose GGUF conversion permutes q/k rows


class AdapterError(Exception):
    """An adapter that cannot be converted or served; the message says how to fix it."""


@dataclass(frozen=True)
class BaseInfo:
    """What the conversion needs from the base GGUF file."""

    arch: str
    blocks: int
    heads: int
    kv_heads: int
    shapes: dict[str, tuple[int, ...]]  # tensor name -> numpy-order shape (out, in)


def base_gguf(base: str | None) -> Path | None:
    """The GGUF file llama.cpp serves for a trainer `base`: the embedded model (None, `smollm2`,
    `local/smollm2`, or its converted copy under $TEACHBACK_HOME/models), or a .gguf file. None for a
    base that exists only as a Hugging Face directory: llama.cpp cannot serve adapters on it."""
    from agent.providers.llama_engine import PACKAGED_MODELS, LocalModelError, model_path

    name = (base or "smollm2").removeprefix("local/")
    given = Path(name).expanduser()
    if given.is_dir():
        from trainer.weights import models_dir

        if given.resolve().parent != models_dir().resolve() or given.name not in PACKAGED_MODELS:
            return None
        name = given.name
    try:
        return model_path(name)
    except LocalModelError:
        return None


def served_model(serve: str | None, base: str | None) -> Path | None:
    """The GGUF file an adapter is served on: `serve` (a file or a packaged model's name) when
    given, else the base's own GGUF (base_gguf)."""
    if serve is None:
        return base_gguf(base)
    from agent.providers.llama_engine import LocalModelError, model_path

    try:
        return model_path(serve.removeprefix("local/"))
    except LocalModelError as exc:
        raise AdapterError(f"--serve {serve}: {exc}") from exc


def ensure_served(adapter_dir: Path, gguf: Path) -> Path:
    """adapter_dir/adapter.gguf for `gguf`, converted when missing or older than the adapter."""
    served, weights = adapter_dir / ADAPTER_GGUF, adapter_dir / PEFT_WEIGHTS
    if served.is_file() and (not weights.is_file() or served.stat().st_mtime_ns >= weights.stat().st_mtime_ns):
        return served
    return convert_adapter(adapter_dir, gguf, served)


def base_info(model: Path) -> BaseInfo:
    import gguf

    reader = gguf.GGUFReader(str(model))

    def field(key: str) -> Any:
        found = reader.get_field(key)
        if found is None:
            raise AdapterError(f"{model} has no {key} in its metadata; is it a model GGUF file?")
        return found.contents()

    arch = field("general.architecture")
    shapes = {t.name: tuple(int(n) for n in reversed(t.shape.tolist())) for t in reader.tensors}
    return BaseInfo(
        arch=arch,
        blocks=int(field(f"{arch}.block_count")),
        heads=int(field(f"{arch}.attention.head_count")),
        kv_heads=int(field(f"{arch}.attention.head_count_kv")),
        shapes=shapes,
    )


def convert_adapter(adapter_dir: str | Path, model: str | Path, out: str | Path | None = None) -> Path:
    """Write the GGUF LoRA adapter for the peft adapter in `adapter_dir`, for the base model GGUF
    file `model`; `out` defaults to `adapter_dir/adapter.gguf`. Written to a temporary file and
    renamed, so a reader never sees half a file."""
    adapter_dir = Path(adapter_dir)
    config = _peft_config(adapter_dir)
    info = base_info(Path(model))
    pairs = _lora_pairs(adapter_dir)
    names = _name_map(info)
    tensors = {}
    for module, (a, b) in sorted(pairs.items()):
        name = _gguf_name(module, info, names)
        b = b * _fold_factor(module, a.shape[0], config)
        if info.arch in _PERMUTED_QK and name.endswith(("attn_q.weight", "attn_k.weight")):
            b = _permute_rows(b, info.kv_heads if name.endswith("attn_k.weight") else info.heads)
        _check_shape(name, a, b, info)
        tensors[f"{name}.lora_a"], tensors[f"{name}.lora_b"] = a, b
    target = Path(out) if out is not None else adapter_dir / ADAPTER_GGUF
    _write(target, info.arch, float(config["lora_alpha"]), tensors)
    return target


def _peft_config(adapter_dir: Path) -> dict[str, Any]:
    path = adapter_dir / PEFT_CONFIG
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise AdapterError(
            f"cannot read {path} ({exc.strerror}): give a directory written by "
            "`teachback train` or peft's save_pretrained."
        ) from exc
    except json.JSONDecodeError as exc:
        raise AdapterError(f"{path} is not JSON ({exc}).") from exc
    if config.get("peft_type") != "LORA":
        raise AdapterError(f"{path}: peft_type is {config.get('peft_type')!r}; only LoRA adapters can be served.")
    if config.get("use_dora"):
        raise AdapterError(f"{path}: DoRA adapters cannot be served by llama.cpp; train with use_dora=False.")
    if not config.get("lora_alpha"):
        raise AdapterError(f"{path}: lora_alpha is missing or 0; the adapter would do nothing.")
    return config


def _lora_pairs(adapter_dir: Path) -> dict[str, tuple[Any, Any]]:
    """{module name: (A, B)} as float32 numpy arrays, A rank x in, B out x rank."""
    from safetensors.torch import load_file

    path = adapter_dir / PEFT_WEIGHTS
    if not path.is_file():
        raise AdapterError(f"{path} is missing: save the adapter with safetensors (peft's default).")
    parts: dict[str, dict[str, Any]] = {}
    for key, tensor in load_file(str(path), device="cpu").items():
        module, _, kind = key.removeprefix(_PEFT_PREFIX).rpartition(".lora_")
        if not module or kind not in ("A.weight", "B.weight"):
            raise AdapterError(
                f"{path} holds {key}, which is not a LoRA matrix (full weights such as modules_to_save or "
                "new embeddings cannot be served as a llama.cpp adapter); train without them."
            )
        parts.setdefault(module, {})[kind[0]] = tensor.float().numpy()
    missing = [m for m, ab in parts.items() if len(ab) != 2]
    if missing:
        raise AdapterError(f"{path}: {', '.join(missing)} lack lora_A or lora_B; the file is incomplete.")
    if not parts:
        raise AdapterError(f"{path} holds no LoRA matrices.")
    return {module: (ab["A"], ab["B"]) for module, ab in parts.items()}


def _name_map(info: BaseInfo) -> Any:
    import gguf

    arch = {name: key for key, name in gguf.MODEL_ARCH_NAMES.items()}.get(info.arch)
    if arch is None:
        raise AdapterError(f"the gguf package does not know the architecture {info.arch!r}; upgrade gguf.")
    return gguf.get_tensor_name_map(arch, info.blocks)


def _gguf_name(module: str, info: BaseInfo, names: Any) -> str:
    name = names.get_name(f"{module}.weight", try_suffixes=(".weight",))
    if name is None or name not in info.shapes:
        raise AdapterError(
            f"the adapter's module {module} has no tensor in the base model "
            f"(looked for {name or 'a mapped name'}): was it trained on another base model?"
        )
    if name.startswith(("token_embd", "output.")):
        raise AdapterError(
            f"the adapter changes {module} (embeddings or the output head); train LoRA on the "
            "attention and MLP projections only."
        )
    return name


def _fold_factor(module: str, rank: int, config: dict[str, Any]) -> float:
    """peft's scale for `module` divided by llama.cpp's (lora_alpha / rank)."""
    alpha = float(config["lora_alpha"])
    pattern_rank = _pattern(config.get("rank_pattern") or {}, module)
    pattern_alpha = _pattern(config.get("alpha_pattern") or {}, module)
    module_alpha = float(pattern_alpha) if pattern_alpha is not None else alpha
    if pattern_rank is not None and int(pattern_rank) != rank:
        raise AdapterError(f"{module}: rank_pattern says {pattern_rank} but its matrices have rank {rank}.")
    peft_scale = module_alpha / math.sqrt(rank) if config.get("use_rslora") else module_alpha / rank
    return peft_scale / (alpha / rank)


def _pattern(pattern: dict[str, Any], module: str) -> Any:
    """peft's per-module override: the longest key that the module name ends with."""
    hits = [key for key in pattern if module == key or module.endswith(f".{key}")]
    return pattern[max(hits, key=len)] if hits else None


def _permute_rows(b: Any, heads: int) -> Any:
    """convert_hf_to_gguf's LlamaModel.permute on the output rows (`heads` of them): within each
    head, the two rotary halves become interleaved pairs."""
    return b.reshape(heads, 2, b.shape[0] // heads // 2, *b.shape[1:]).swapaxes(1, 2).reshape(b.shape)


def _check_shape(name: str, a: Any, b: Any, info: BaseInfo) -> None:
    out_features, in_features = info.shapes[name][-2:]
    if a.shape[1] != in_features or b.shape[0] != out_features or a.shape[0] != b.shape[1]:
        raise AdapterError(
            f"{name}: LoRA shapes A {tuple(a.shape)} and B {tuple(b.shape)} do not fit the base "
            f"weight ({out_features} x {in_features}): was it trained on another base model?"
        )


def _write(target: Path, arch: str, alpha: float, tensors: dict[str, Any]) -> None:
    import gguf
    import numpy as np

    target.parent.mkdir(parents=True, exist_ok=True)
    handle, staging = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.parent)
    os.close(handle)
    try:
        writer = gguf.GGUFWriter(staging, arch)
        writer.add_type(gguf.GGUFType.ADAPTER)
        writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
        writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
        for name, data in tensors.items():
            writer.add_tensor(name, np.ascontiguousarray(data, dtype=np.float32))
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(staging, target)
    finally:
        if os.path.exists(staging):
            os.unlink(staging)
