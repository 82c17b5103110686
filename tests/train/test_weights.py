"""Base weights: the embedded GGUF converted once to safetensors that reload and agree with llama.cpp."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from trainer.weights import EMBEDDED, WeightsError, convert_gguf, resolve_base

PROMPTS = (
    [{"role": "user", "content": "Write a Python function that adds two numbers."}],
    [
        {"role": "system", "content": "You edit files with the edit_file tool."},
        {"role": "user", "content": "Rename greet to welcome in app.py."},
    ],
)


@pytest.mark.slow
@pytest.mark.real_model
@pytest.mark.timeout(600)
def test_conversion_writes_safetensors_and_tokenizer_that_reload(embedded_model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    names = {p.name for p in embedded_model_dir.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"} <= names
    assert "quantization_config" not in json.loads((embedded_model_dir / "config.json").read_text())
    assert [p.name for p in embedded_model_dir.parent.iterdir()] == [EMBEDDED]  # no staging left
    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(embedded_model_dir, local_files_only=True)
    assert model.config.vocab_size == len(tokenizer) == 49152
    assert sum(p.numel() for p in model.parameters()) == 134_515_008


@pytest.mark.slow
@pytest.mark.real_model
@pytest.mark.timeout(600)
@pytest.mark.parametrize("messages", PROMPTS)
def test_next_token_logits_agree_with_llama_cpp_on_the_gguf(embedded_model_dir: Path, messages: list) -> None:
    """Both sides use the same dequantized Q4_1 weights; llama.cpp also quantizes activations
    (q8_1) in its matrix products, which moves a log-probability by up to ~0.4 here."""
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    llama_cpp = pytest.importorskip("llama_cpp")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agent.providers.llama_engine import load_engine, model_path

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(embedded_model_dir, local_files_only=True)
    ids = list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"])
    engine = load_engine(str(model_path(EMBEDDED)))
    rendered = engine.formatter(messages=messages)
    engine_ids = engine.llm.tokenize(rendered.prompt.encode(), add_bos=not rendered.added_special, special=True)
    assert engine_ids == ids  # the converted tokenizer and template render what the agent feeds llama.cpp

    with torch.no_grad():
        torch_logits = model(torch.tensor([ids])).logits[0, -1].numpy()
    engine.llm.reset()
    engine.llm.eval(ids)
    vocab = engine.llm.n_vocab()
    llama_logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(engine.llm.ctx, -1), shape=(vocab,)).copy()

    ours, theirs = _log_softmax(np, torch_logits), _log_softmax(np, llama_logits)
    top = np.argsort(-theirs)[:5]
    assert ours.argmax() == theirs.argmax()
    assert np.abs(ours[top] - theirs[top]).max() < 0.6
    assert float((np.exp(theirs) * (theirs - ours)).sum()) < 0.05  # KL(llama.cpp || torch), nats
    assert np.corrcoef(torch_logits, llama_logits)[0, 1] > 0.99


def _log_softmax(np, logits):
    shifted = logits - logits.max()
    return shifted - np.log(np.exp(shifted).sum())


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_resolve_base_finds_the_converted_model_under_teachback_home(
    embedded_model_dir: Path, teachback_home: Path
) -> None:
    cached = teachback_home / "models" / EMBEDDED
    cached.parent.mkdir()
    cached.symlink_to(embedded_model_dir, target_is_directory=True)
    before = (cached / "model.safetensors").stat().st_mtime_ns
    assert resolve_base(None) == cached
    assert resolve_base(f"local/{EMBEDDED}") == cached
    assert (cached / "model.safetensors").stat().st_mtime_ns == before  # not converted again


def test_resolve_base_takes_a_local_model_directory_as_is(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    assert resolve_base(str(tmp_path)) == tmp_path


def test_resolve_base_refuses_a_directory_without_a_model(tmp_path: Path) -> None:
    with pytest.raises(WeightsError, match="no config.json"):
        resolve_base(str(tmp_path))


def test_resolve_base_names_what_it_accepts_for_an_unknown_model() -> None:
    with pytest.raises(WeightsError, match="local/smollm2.*Hugging Face model directory"):
        resolve_base("no-such-model")


def test_a_failed_conversion_leaves_nothing_behind(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("transformers")
    bogus = tmp_path / "broken.gguf"
    bogus.write_text("not a model")
    models = tmp_path / "models"
    with caplog.at_level(logging.INFO, logger="trainer.weights"), pytest.raises(WeightsError, match="not a GGUF"):
        convert_gguf(bogus, models / "broken")
    assert "converting broken.gguf" in caplog.text
    assert list(models.iterdir()) == []


def test_conversion_refuses_a_target_that_holds_something_else(tmp_path: Path) -> None:
    (tmp_path / "smollm2").mkdir()
    with pytest.raises(WeightsError, match="remove it and retry"):
        convert_gguf(tmp_path / "x.gguf", tmp_path / "smollm2")
