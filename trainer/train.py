"""`teachback train`: a LoRA adapter trained on exported feedback pairs.

Seeded and deterministic (the same configuration, data and thread count give the same losses),
checkpointed every `checkpoint_every` steps and resumed from the latest checkpoint after a kill.
Pairs run one at a time (a CPU gains nothing from padding them into a batch): each optimizer step
accumulates the gradients of batch_size x grad_accum pairs. Under `accelerate launch` every process
trains that many pairs of each step and the gradients are averaged over the processes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from trainer import checkpoints
from trainer.data import TrainError, data_hash, load_examples, read_records, stream
from trainer.objectives import OBJECTIVES, TEACHERS, Objective, Options, ema_start, ema_update, trainable
from trainer.render import HINTS

log = logging.getLogger(__name__)

ATTENTION = ["q_proj", "k_proj", "v_proj", "o_proj"]
METADATA = "teachback_train.json"
# Fields that do not change what is trained: a checkpoint made under other values still resumes.
_RUN_FIELDS = ("data", "out", "steps", "epochs", "resume", "checkpoint_every")

# Settings that move a LoRA on a branch round's few hundred examples (the sample suite's measured
# round, bench/learn_round.py); `teachback train` keeps its own defaults.
BRANCH_ROUND: dict[str, Any] = {"lr": 5e-4, "steps": 12, "batch_size": 6}

__all__ = ["TrainConfig", "TrainError", "TrainResult", "StepReport", "train"]


@dataclass(frozen=True)
class TrainConfig:
    data: list[Path]
    out: Path
    objective: str = "sdpo"  # sdpo | sft | dpo | mix
    base: str | None = None  # None: the embedded model; or a local Hugging Face model directory
    seed: int = 0
    steps: int | None = None  # optimizer steps; None: `epochs` passes over the pairs
    epochs: float = 1.0
    lr: float = 1e-4
    lora_r: int = 16
    lora_alpha: int = 32
    top_k: int = 20
    # 0 forward KL (the default: top-k reverse KL collapses sub-1B students), 0.5 Jensen-Shannon, 1 reverse KL
    alpha: float = 0.0
    teacher: str = "base"  # base (frozen) | ema (of the student)
    ema_decay: float = 0.95  # EMA teacher: teacher <- decay * teacher + (1 - decay) * student, each step
    is_clip: float | None = 2.0  # importance ratio cap; None: no importance weights
    max_tokens: int | None = 128  # tokens per sequence run with gradients; None: the whole sequence
    max_completion_tokens: int = 256
    batch_size: int = 4  # pairs per gradient accumulation round
    grad_accum: int = 1
    resume: bool = True
    checkpoint_every: int = 10
    hint: str = "feedback"  # what the teacher is told: feedback | demonstration | hindsight
    dpo_beta: float = 0.1
    dpo_nll: float = 1.0  # weight of the chosen reply's mean NLL added to the DPO loss (0: plain DPO)
    mix_sft: float = 0.5
    gap_filter: bool = True  # sdpo, mix: leave out pairs whose base teacher-student gap is not negative

    def fingerprint(self, data: str) -> str:
        kept = {k: v for k, v in self.jsonable().items() if k not in _RUN_FIELDS}
        return hashlib.sha256(json.dumps({**kept, "data": data}, sort_keys=True).encode()).hexdigest()[:16]

    def jsonable(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        return {**values, "data": [str(p) for p in self.data], "out": str(self.out)}


@dataclass(frozen=True)
class TrainResult:
    adapter_dir: Path
    steps: int
    losses: list[float]
    tokens_per_second: float  # the pairs' full sequences (student and teacher) per second of training
    seconds: float  # the whole run: loading, rendering, training, saving
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StepReport:
    step: int
    total: int
    loss: float
    tokens_per_second: float
    seconds: float


Progress = Callable[[StepReport], None]


def train(config: TrainConfig, progress: Progress | None = None) -> TrainResult:
    started = time.perf_counter()
    _check(config)
    out = config.out.expanduser()
    records = read_records(config.data)
    digest = data_hash(config.data)
    fingerprint = config.fingerprint(digest)
    done = _finished(out, fingerprint, config)
    if done is not None:
        return done

    import torch
    from accelerate import Accelerator

    accelerator = Accelerator()
    torch.manual_seed(config.seed)
    model, tokenizer = _model(config)
    loaded = load_examples(
        records,
        tokenizer,
        objective=config.objective,
        hint=config.hint,
        max_completion_tokens=config.max_completion_tokens,
    )
    examples = loaded.examples
    model.to(accelerator.device)
    ema = ema_start(model) if config.teacher == "ema" else None
    # One objective for the gap filter and the steps: the base's keys and values of the prompts,
    # computed for the filter, are the teacher's for the first steps.
    objective = Objective(model, _options(config), ema)
    gap_filter: dict[str, Any] = {}
    if config.gap_filter and config.objective in ("sdpo", "mix"):
        examples, gap_filter = _filter_by_gap(objective, examples, loaded.left_out, mix=config.objective == "mix")
    per_step = config.batch_size * config.grad_accum * accelerator.num_processes
    total = config.steps or max(1, math.ceil(config.epochs * len(examples) / per_step))
    optimizer = torch.optim.AdamW(list(trainable(model).values()), lr=config.lr, weight_decay=0.0)
    state = _resume(out, config, fingerprint, model, optimizer, ema)
    pairs = stream(examples, config.seed)
    for _ in islice(pairs, state["step"] * per_step):  # what earlier steps trained
        pass
    loop_started = time.perf_counter() - state["seconds"]
    while state["step"] < total:
        batch = list(islice(pairs, per_step))[accelerator.process_index :: accelerator.num_processes]
        loss = _step(accelerator, model, optimizer, objective, batch)
        if ema is not None:
            ema_update(ema, model, config.ema_decay)
        state["step"] += 1
        state["losses"].append(float(accelerator.gather(loss.detach().reshape(1)).mean()))
        state["tokens"] += sum(sequence_tokens(example, config.objective) for example in batch)
        state["seconds"] = time.perf_counter() - loop_started
        if progress is not None:
            progress(
                StepReport(
                    state["step"], total, state["losses"][-1], state["tokens"] / state["seconds"], state["seconds"]
                )
            )
        if state["step"] % config.checkpoint_every == 0 and state["step"] < total and accelerator.is_main_process:
            checkpoints.save(out, state["step"], _snapshot(state, fingerprint, model, optimizer, ema))
    metrics = {
        "pairs": len(examples),
        "left_out": dict(loaded.left_out),
        **({"gap_filter": gap_filter} if gap_filter else {}),
        "tokens": state["tokens"],
        "student_tokens_computed": objective.computed,
        "prefix_tokens_computed": objective.prefix.computed,
        "train_seconds": state["seconds"],
        **_gap(objective.gaps, config.hint),
    }
    result = TrainResult(
        out,
        state["step"],
        state["losses"],
        state["tokens"] / max(state["seconds"], 1e-9),
        time.perf_counter() - started,
        metrics,
    )
    if accelerator.is_main_process:
        _save(model, config, digest, fingerprint, result)
        checkpoints.remove(out)
    return result


def _filter_by_gap(
    objective: Objective, examples: list, left_out: Any, *, mix: bool = False
) -> tuple[list, dict[str, Any]]:
    """The pairs whose teacher (the frozen base, told the feedback) finds the failed reply less
    likely than the student does, before any step; the others would teach the mistake. Under mix,
    such a pair with a correction keeps its sft term and loses only its distillation term."""
    kept, gaps, dropped_ids = [], [], []
    for example in examples:
        gap = objective.base_gap(example)
        gaps.append(gap)
        if gap < 0:
            kept.append(example)
            continue
        dropped_ids.append(example.id)
        if mix and example.chosen is not None:
            kept.append(dataclasses.replace(example, distil=False))
    dropped = len(dropped_ids)
    if dropped:
        left_out["a teacher-student gap of the wrong sign (the teacher finds the failure as likely)"] += dropped
        log.warning("%d of %d pairs left out: their teacher-student gap is not negative", dropped, len(examples))
    if not kept:
        raise TrainError(
            f"every one of the {len(examples)} pairs has a teacher-student gap of the wrong sign: told the "
            "feedback, the teacher still finds the failed replies as likely, so distillation would teach them. "
            "Try --hint demonstration, --objective sft or dpo, or --no-gap-filter to train them anyway."
        )
    summary = {
        "checked": len(examples),
        "dropped": dropped,
        "mean_base_gap": sum(gaps) / len(gaps),
        "dropped_ids": dropped_ids[:100],
    }
    return kept, summary


def _gap(gaps: list[float], hint: str) -> dict[str, float]:
    """The mean teacher-student gap on the failed tokens. Self-distillation moves the student away
    from a failed reply only where the teacher finds it less likely (a negative gap); a hint that
    quotes the failed reply can make a small model's teacher copy it instead."""
    if not gaps:
        return {}
    mean = sum(gaps) / len(gaps)
    if mean >= 0:
        log.warning(
            "the teacher finds the failed replies more likely than the student does (mean gap %+.3f nats "
            "per token with --hint %s): training pulls toward the mistakes; try another --hint",
            mean,
            hint,
        )
    return {"teacher_gap": mean, "teacher_gap_negative": sum(g < 0 for g in gaps) / len(gaps)}


def _step(accelerator: Any, model: Any, optimizer: Any, objective: Objective, batch: list) -> Any:
    """Accumulate the batch's gradients, one pair at a time, average them over the processes, and
    take one optimizer step. (Averaged by hand rather than by DistributedDataParallel, which
    refuses a backward pass through two forward passes, as DPO and mix make.)"""
    import torch

    total = torch.zeros(())
    for example in batch:
        with accelerator.autocast():
            loss = objective.loss(example) / len(batch)
        accelerator.backward(loss)
        total += loss.detach().cpu()
    params = [p for p in trainable(model).values() if p.grad is not None]
    if accelerator.num_processes > 1:
        for p in params:
            p.grad = accelerator.reduce(p.grad, reduction="mean")
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return total


def _model(config: TrainConfig) -> tuple[Any, Any]:
    from peft import LoraConfig, get_peft_model

    from trainer.scoring import load

    model, tokenizer = load(config.base)
    lora = LoraConfig(
        r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=0.0, target_modules=ATTENTION, task_type="CAUSAL_LM"
    )
    model = get_peft_model(model, lora)
    model.train()
    return model, tokenizer


def _options(config: TrainConfig) -> Options:
    return Options(
        objective=config.objective,
        top_k=config.top_k,
        alpha=config.alpha,
        is_clip=config.is_clip,
        window=config.max_tokens,
        dpo_beta=config.dpo_beta,
        mix_sft=config.mix_sft,
        dpo_nll=config.dpo_nll,
    )


def sequence_tokens(example: Any, objective: str) -> int:
    """Tokens of the sequences a plain trainer runs for this pair (student and teacher or reference)."""
    r, failed, chosen = example.rendered, len(example.completion), len(example.chosen or [])
    sdpo = len(r.prompt) + len(r.teacher) + 2 * failed
    sft = len(r.prompt) + chosen
    if objective == "sdpo" or (objective == "mix" and not chosen):
        return sdpo
    if objective == "sft":
        return sft
    if objective == "dpo":
        return 2 * (2 * len(r.prompt) + chosen + failed)
    return sdpo + sft


def _check(config: TrainConfig) -> None:
    problems = []
    if config.objective not in OBJECTIVES:
        problems.append(f"--objective must be one of {', '.join(OBJECTIVES)}, got {config.objective!r}")
    if config.teacher not in TEACHERS:
        problems.append(f"--teacher must be base or ema, got {config.teacher!r}")
    if config.hint not in HINTS:
        problems.append(f"--hint must be one of {', '.join(HINTS)}, got {config.hint!r}")
    if not 0.0 <= config.alpha <= 1.0:
        problems.append(f"--alpha must be between 0 (forward KL) and 1 (reverse KL), got {config.alpha}")
    if config.dpo_nll < 0:
        problems.append(f"--dpo-nll must be at least 0, got {config.dpo_nll}")
    if not 0.0 <= config.mix_sft <= 1.0 or not 0.0 <= config.ema_decay < 1.0:
        problems.append("--mix-sft must be in [0, 1] and --ema-decay in [0, 1)")
    for name in ("top_k", "lora_r", "batch_size", "grad_accum", "checkpoint_every", "max_completion_tokens"):
        if getattr(config, name) < 1:
            problems.append(f"--{name.replace('_', '-')} must be at least 1")
    if (config.steps is not None and config.steps < 1) or config.epochs <= 0:
        problems.append("--steps must be at least 1 and --epochs above 0")
    if config.max_tokens is not None and config.max_tokens < 2:
        problems.append("--max-tokens must be at least 2 (or none for whole sequences)")
    if not config.data:
        problems.append("pass at least one --data file (an sdpo export)")
    if problems:
        raise TrainError("; ".join(problems) + ".")


def _finished(out: Path, fingerprint: str, config: TrainConfig) -> TrainResult | None:
    """The result already in `out` when the same training finished there (resume)."""
    path = out / METADATA
    if not config.resume or not path.is_file():
        return None
    saved = json.loads(path.read_text())
    r = saved["result"]
    if saved.get("fingerprint") != fingerprint:
        raise TrainError(
            f"{out} holds an adapter trained with other settings or data; pass another --out, "
            "or --no-resume to train again in its place."
        )
    if r["steps"] < (config.steps or 0):
        raise TrainError(
            f"{out} holds an adapter trained for {r['steps']} steps, fewer than --steps "
            f"{config.steps}; pass another --out, or --no-resume to train again in its place."
        )
    return TrainResult(out, r["steps"], r["losses"], r["tokens_per_second"], r["seconds"], r.get("metrics", {}))


def _resume(out: Path, config: TrainConfig, fingerprint: str, model: Any, optimizer: Any, ema: Any) -> dict[str, Any]:
    import torch
    from peft import set_peft_model_state_dict

    fresh = {"step": 0, "losses": [], "tokens": 0, "seconds": 0.0}
    if not config.resume:
        checkpoints.remove(out)
        return fresh
    saved = checkpoints.latest(out)
    if saved is None:
        return fresh
    if saved["fingerprint"] != fingerprint:
        raise TrainError(
            f"the checkpoints in {checkpoints.directory(out)} are of a run with other settings or "
            "data; pass another --out, or --no-resume to start over."
        )
    set_peft_model_state_dict(model, saved["lora"])
    optimizer.load_state_dict(saved["optimizer"])
    if ema is not None:
        ema.update(saved["ema"])
    torch.set_rng_state(saved["rng"])
    return {key: saved[key] for key in fresh}


def _snapshot(state: dict[str, Any], fingerprint: str, model: Any, optimizer: Any, ema: Any) -> dict[str, Any]:
    import torch
    from peft import get_peft_model_state_dict

    return {
        **state,
        "fingerprint": fingerprint,
        "lora": get_peft_model_state_dict(model),
        "optimizer": optimizer.state_dict(),
        "ema": ema or {},
        "rng": torch.get_rng_state(),
    }


def _save(model: Any, config: TrainConfig, digest: str, fingerprint: str, result: TrainResult) -> None:
    from trainer.weights import resolve_base

    result.adapter_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(result.adapter_dir)
    metadata = {
        "config": config.jsonable(),
        "data_hash": digest,
        "fingerprint": fingerprint,
        "base": config.base or "local/smollm2",
        "base_dir": str(resolve_base(config.base)),
        "result": {
            "steps": result.steps,
            "losses": result.losses,
            "tokens_per_second": result.tokens_per_second,
            "seconds": result.seconds,
            "metrics": result.metrics,
        },
    }
    partial = result.adapter_dir / f"{METADATA}.partial"
    partial.write_text(json.dumps(metadata, indent=2))
    partial.replace(result.adapter_dir / METADATA)
