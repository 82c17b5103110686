"""The embedded model converted to a Hugging Face directory once per test session.

The autouse TEACHBACK_HOME fixture gives every test its own home, so the converted model lives in a
session directory instead and tests receive its path explicitly."""

from __future__ import annotations

import os
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
