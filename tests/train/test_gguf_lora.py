"""A peft LoRA adapter converted to GGUF and served by llama.cpp does what it does in torch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("peft")
pytest.importorskip("llama_cpp")
np = pytest.importorskip("numpy")

from agent.providers.llama_engine import load_engine, model_path, promoted_pointer  # noqa: E402
from trainer.gguf_lora import AdapterError, convert_adapter  # noqa: E402
from trainer.weights import EMBEDDED  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.real_model, pytest.mark.timeout(600)]

PROMPT = "<|im_start|>user\nWrite a Python function that adds two numbers.<|im_end|>\n<|im_start|>assistant\n"
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# Random lora_B this large moves the next-token distribution by several nats: far above the
# ~0.005-0.01 nats the Q4_1 quantization of the served base model costs.
B_STD = 0.25


def make_adapter(base_dir: Path, out: Path, *, seed: int = 0, rslora: bool = False, b_std: float = B_STD):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=TARGETS, lora_dropout=0.0, use_rslora=rslora)
    peft_model = get_peft_model(model, config)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, b_std)
    peft_model.save_pretrained(out)
    return peft_model


def torch_logprobs(peft_model, ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Next-token log-probabilities after `ids`: with the adapter, and without it."""
    import torch

    with torch.no_grad():
        adapted = torch.log_softmax(peft_model(torch.tensor([ids])).logits[0, -1].double(), -1).numpy()
        with peft_model.disable_adapter():
            base = torch.log_softmax(peft_model(torch.tensor([ids])).logits[0, -1].double(), -1).numpy()
    return adapted, base


def served_logprobs(ids: list[int], lora: Path | None) -> np.ndarray:
    from llama_cpp import llama_get_logits_ith

    engine = load_engine(str(model_path(EMBEDDED)), 512, None, None if lora is None else str(lora))
    llm = engine.llm
    llm.reset()
    llm.eval(ids)
    logits = np.ctypeslib.as_array(llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),)).astype(np.float64)
    peak = logits.max()
    return logits - peak - np.log(np.exp(logits - peak).sum())


def kl(p: np.ndarray, q: np.ndarray) -> float:
    return float((np.exp(p) * (p - q)).sum())


@pytest.fixture(scope="module")
def adapter(embedded_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("adapter")
    peft_model = make_adapter(embedded_model_dir, out)
    return out, peft_model, convert_adapter(out, model_path(EMBEDDED))


def test_converted_file_has_llama_cpp_adapter_layout(adapter) -> None:
    import gguf

    out, _, path = adapter
    assert path == out / "adapter.gguf"
    reader = gguf.GGUFReader(str(path))
    assert reader.get_field("general.type").contents() == "adapter"
    assert reader.get_field("general.architecture").contents() == "llama"
    assert reader.get_field("adapter.type").contents() == "lora"
    assert reader.get_field("adapter.lora.alpha").contents() == pytest.approx(16.0)
    shapes = {t.name: tuple(int(n) for n in t.shape) for t in reader.tensors}  # ggml order: ne0 first
    assert len(shapes) == 30 * len(TARGETS) * 2
    assert shapes["blk.0.attn_q.weight.lora_a"] == (576, 8)  # in x rank
    assert shapes["blk.0.attn_k.weight.lora_b"] == (8, 192)  # rank x out (3 kv heads of 64)
    assert shapes["blk.29.ffn_down.weight.lora_a"] == (1536, 8)


def test_served_adapter_moves_logprobs_as_the_torch_adapter_does(adapter, embedded_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    _, peft_model, path = adapter
    ids = AutoTokenizer.from_pretrained(embedded_model_dir)(PROMPT)["input_ids"]
    torch_adapted, torch_base = torch_logprobs(peft_model, ids)
    served_adapted, served_base = served_logprobs(ids, path), served_logprobs(ids, None)

    effect = kl(torch_adapted, torch_base)
    assert effect > 1.0, "the test adapter must change the model clearly"
    assert kl(served_adapted, served_base) > 0.5 * effect
    # Served with the adapter vs torch with it: as close as the quantized base is to torch's base.
    assert kl(torch_adapted, served_adapted) < 0.05
    assert kl(torch_adapted, served_adapted) < 0.02 * effect
    assert served_adapted.argmax() == torch_adapted.argmax() != torch_base.argmax()
    top = np.argsort(-torch_adapted)[:50]
    change_torch, change_served = torch_adapted - torch_base, served_adapted - served_base
    assert np.corrcoef(change_torch[top], change_served[top])[0, 1] > 0.95


def test_rslora_scaling_is_folded_into_lora_b(embedded_model_dir: Path, tmp_path: Path) -> None:
    import gguf
    from safetensors.numpy import load_file

    make_adapter(embedded_model_dir, tmp_path, rslora=True, b_std=0.01)
    path = convert_adapter(tmp_path, model_path(EMBEDDED))
    stored = load_file(str(tmp_path / "adapter_model.safetensors"))
    peft_b = stored["base_model.model.model.layers.3.self_attn.v_proj.lora_B.weight"]
    served = {t.name: t for t in gguf.GGUFReader(str(path)).tensors}["blk.3.attn_v.weight.lora_b"]
    # llama.cpp scales by alpha / r; rsLoRA by alpha / sqrt(r): lora_b carries sqrt(r) = sqrt(8).
    np.testing.assert_allclose(np.asarray(served.data).reshape(peft_b.shape), peft_b * np.sqrt(8), rtol=1e-6)


def test_adapter_for_another_model_is_refused_with_the_reason(adapter, tmp_path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    out, _, _ = adapter
    tensors = load_file(str(out / "adapter_model.safetensors"))
    renamed = {k.replace("layers.0.", "layers.40."): v for k, v in tensors.items()}
    (tmp_path / "adapter_config.json").write_text((out / "adapter_config.json").read_text())
    save_file(renamed, str(tmp_path / "adapter_model.safetensors"))
    with pytest.raises(AdapterError, match="another base model"):
        convert_adapter(tmp_path, model_path(EMBEDDED))
    assert not (tmp_path / "adapter.gguf").exists()


def test_promoted_adapter_is_served_from_the_next_call(adapter, teachback_home: Path) -> None:
    from agent.llm import load_litellm

    litellm = load_litellm()
    _, _, path = adapter
    request = {
        "model": "local/smollm2",
        "messages": [{"role": "user", "content": "Name three colours."}],
        "max_tokens": 6,
        "temperature": 0.0,
        "seed": 1,
    }

    def reply() -> str:
        return litellm.completion(**request).choices[0].message.content

    base = reply()
    pointer = promoted_pointer()
    pointer.parent.mkdir(parents=True, exist_ok=True)
    pointer.write_text(json.dumps({"adapter_id": "a1", "gguf": str(path), "base": str(model_path(EMBEDDED))}))
    adapted = reply()
    assert adapted != base
    assert litellm.completion(**request, adapter="none").choices[0].message.content == base
    named = litellm.completion(**{**request, "model": f"local/smollm2@{path.parent}"})
    assert named.choices[0].message.content == adapted
    pointer.unlink()  # rolled back: the base model again, without restarting anything
    assert reply() == base
