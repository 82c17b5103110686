"""The two-layer test model's GGUF file (tests/models.py) is the Hugging Face model as llama.cpp
reads it: the same next-token logits at the first positions, where llama.cpp's arithmetic has not
yet drifted from torch's. A query or key projection left unpermuted parts at the second position."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_the_gguf_file_gives_the_hugging_face_models_logits(tiny_model_dir: Path, tiny_gguf: Path) -> None:
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    from llama_cpp import Llama
    from transformers import AutoModelForCausalLM

    llm = Llama(model_path=str(tiny_gguf), n_ctx=64, n_threads=1, verbose=False, logits_all=True)
    ids = llm.tokenize(b"def greet(name):\n    return 'Hello, ' + name", add_bos=False)[:3]
    llm.eval(ids)
    served = np.array(llm.scores[: len(ids)])
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    with torch.no_grad():
        expected = model(torch.tensor([ids])).logits[0].numpy()
    assert np.abs(served[0] - expected[0]).max() < 0.02 * np.abs(expected[0]).max()
    for position in range(len(ids)):
        assert np.corrcoef(served[position], expected[position])[0, 1] > 0.999, position
