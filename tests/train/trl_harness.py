"""One training step of TRL 1.16's trainers on an exported JSONL file, loaded unchanged.

This is the check that teachback's exports feed real trainers with no glue code: the file goes
through `datasets.load_dataset("json", ...)` and straight into `SFTTrainer`, `DPOTrainer` or the
experimental `SDFTTrainer` / `SDPOTrainer`. Everything else is kept small so a step runs on a
laptop CPU: LoRA r=8 on the attention projections, fp32, no length limit that could truncate or
drop a row, and one step: of one row for SFT and DPO (which tokenize every row of the file when the
trainer is built) and of two prompts for SDFT and SDPO (which render prompts as they sample: one
sampled completion of 8 tokens per prompt for SDFT, two for SDPO).
"""

from __future__ import annotations

import importlib.util
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trainer.weights import offline

KINDS = ("sft", "dpo", "sdft", "sdpo")
ATTENTION = ["q_proj", "k_proj", "v_proj", "o_proj"]
COMPLETION_TOKENS = 8  # what the self-distillation trainers sample per rollout


def train_one_step(
    kind: str,
    data_files: str | Path | Sequence[str | Path],
    model_dir: str | Path,
    chat_template: str | None = None,
) -> float:
    """Train one step of `kind` on `data_files` from the model in `model_dir` and return its loss.

    `chat_template` (Jinja text) replaces the tokenizer's own, as `SFTConfig.chat_template_path`
    would; None keeps the model's template."""
    if kind not in KINDS:
        raise ValueError(f"unknown trainer kind {kind!r}; use one of {', '.join(KINDS)}")
    files = [str(data_files)] if isinstance(data_files, (str, Path)) else [str(f) for f in data_files]
    with offline(), tempfile.TemporaryDirectory(prefix=f"trl-{kind}-") as out:
        import torch
        from datasets import load_dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer

        dataset = load_dataset("json", data_files=files, split="train", cache_dir=str(Path(out) / "datasets"))
        tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        if chat_template is not None:
            tokenizer.chat_template = chat_template
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, local_files_only=True)
        trainer = _BUILDERS[kind](model, tokenizer, dataset, _common_args(out))
        trainer.train()
        return _first_loss(trainer.state.log_history)


def _common_args(out: str) -> dict[str, Any]:
    return {
        "output_dir": out,
        "max_steps": 1,
        "per_device_train_batch_size": 1,
        "learning_rate": 1e-4,
        "bf16": False,  # TRL turns bf16 on for CPUs by default; here that is ~15x slower
        "use_cpu": True,
        "gradient_checkpointing": False,  # TRL turns it on: it saves memory at a cost in time
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "seed": 0,
        "disable_tqdm": True,
    }


def _lora() -> Any:
    from peft import LoraConfig

    return LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=ATTENTION, task_type="CAUSAL_LM")


def _sft(model: Any, tokenizer: Any, dataset: Any, common: dict[str, Any]) -> Any:
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(**common, max_length=None)
    return SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer, peft_config=_lora())


def _dpo(model: Any, tokenizer: Any, dataset: Any, common: dict[str, Any]) -> Any:
    from trl import DPOConfig, DPOTrainer

    args = DPOConfig(**common, max_length=None)
    return DPOTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer, peft_config=_lora())


def _self_distillation_args(common: dict[str, Any], generations: int) -> dict[str, Any]:
    """Two prompts per step, so a two-row file is rendered whole."""
    return {
        **common,
        "per_device_train_batch_size": 2 * generations,
        "num_generations": generations,
        "max_prompt_length": None,  # the default (512) cuts the prompt from the left, silently
        "max_completion_length": COMPLETION_TOKENS,
    }


def _sdft(model: Any, tokenizer: Any, dataset: Any, common: dict[str, Any]) -> Any:
    from trl.experimental.sdft import SDFTConfig, SDFTTrainer

    args = SDFTConfig(**_self_distillation_args(common, generations=1))
    return SDFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer, peft_config=_lora())


def _sdpo(model: Any, tokenizer: Any, dataset: Any, common: dict[str, Any]) -> Any:
    from trl.experimental.sdpo import SDPOConfig, SDPOTrainer

    # Without include_environment_feedback, SDPO ignores `privileged_context` and only learns from
    # rollouts that already succeed: with a weak model and a few sampled tokens, none do.
    # SDPO normalizes rewards within a group of rollouts of one prompt: it needs two or more.
    args = SDPOConfig(**_self_distillation_args(common, generations=2), include_environment_feedback=True)
    return SDPOTrainer(
        model=model,
        reward_funcs=[tool_call_reward()],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=_lora(),
    )


_BUILDERS: dict[str, Callable[..., Any]] = {"sft": _sft, "dpo": _dpo, "sdft": _sdft, "sdpo": _sdpo}


def tool_call_reward() -> Callable[..., list[float]]:
    """The exports' own scorer when the package ships it (preferred: it checks the call against
    the recorded schema and feedback); otherwise `_writes_a_tool_call`, a stand-in that only lets
    SDPO run."""
    if importlib.util.find_spec("feedback_store.rewards") is not None:
        from feedback_store.rewards import tool_call_reward as scorer

        return scorer
    return _writes_a_tool_call


def _writes_a_tool_call(prompts: list[Any], completions: list[Any], **_columns: Any) -> list[float]:
    """Stand-in reward: 1.0 when the completion writes a <tool_call> block, else 0.0."""
    return [1.0 if "<tool_call>" in _text(completion) else 0.0 for completion in completions]


def _text(completion: Any) -> str:
    if isinstance(completion, list):  # conversational: [{"role": "assistant", "content": ...}]
        return "".join(str(message.get("content") or "") for message in completion)
    return str(completion)


def _first_loss(history: list[dict[str, Any]]) -> float:
    losses = [entry["loss"] for entry in history if "loss" in entry]
    if not losses:
        raise AssertionError(f"the trainer logged no loss; its log history: {history}")
    return float(losses[0])
