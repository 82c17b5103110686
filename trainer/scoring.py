"""Scoring a record's completion under the student's prompt and the teacher's, with the keys and
values of shared prompt prefixes computed once.

Pairs of one session share almost all of their prompt (system prompt, tool schemas, repository
map, the conversation so far), and the teacher's prompt is the student's with a hint turn before
the reply. A `PrefixCache` holds the keys and values of the last prefix it computed (or of a longer
one that starts with it), under fixed weights; the next sequence computes only what it does not
share with it. That is exact for weights that do not change: the frozen base model (the teacher,
the DPO reference) during training, and any model during evaluation.

`score` / `sequence_logprobs` / `divergence` are what an evaluation needs: the per-token
log-probability of each record's completion under its prompt and under its teacher prompt, and the
mean per-token student->teacher divergence (the training loss's estimator, without importance
weights).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.losses import token_logprobs, topk_divergence
from trainer.render import Rendered, common_prefix, render

if TYPE_CHECKING:
    import torch


def load(base: str | None = None, adapter: str | Path | None = None) -> tuple[Any, Any]:
    """The base model (float32, eval mode) and its tokenizer, with a trained adapter when given."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trainer.weights import offline, resolve_base

    directory = resolve_base(base)
    with offline():
        tokenizer = AutoTokenizer.from_pretrained(directory, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32, local_files_only=True)
        if adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(adapter))
    model.eval()
    return model, tokenizer


@contextlib.contextmanager
def base_weights(model: Any) -> Iterator[None]:
    """The model with its adapters switched off (a plain model as it is)."""
    disable = getattr(model, "disable_adapter", None)
    with disable() if disable is not None else contextlib.nullcontext():
        yield


class AdaptersOff:
    """`model` with its adapters switched off at every call: the base model it was loaded on,
    without a second copy of its weights in memory."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with base_weights(self.model):
            return self.model(*args, **kwargs)

    def parameters(self) -> Iterator[Any]:
        return self.model.parameters()


class PrefixCache:
    """Keys and values of one token prefix under fixed weights (the base's, or the adapted model's
    while it is not being trained), extended to each new prefix by computing only the new part."""

    def __init__(self, model: Any, adapted: bool = False) -> None:
        self.model = model
        self.adapted = adapted
        self.ids: list[int] = []
        self.layers: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.computed = 0  # tokens run through the model, for throughput figures

    def extend(self, ids: list[int]) -> None:
        """Hold the keys and values of `ids` as the first `len(ids)` positions (`view` reads them).
        A prefix of what is held is held already: the longer sequence stays, so the pairs of one
        session, whose prompts extend each other, compute each shared token once in any order."""
        import torch

        keep = common_prefix(self.ids, ids)
        if keep == len(ids):
            return
        self.layers = [(k[..., :keep, :], v[..., :keep, :]) for k, v in self.layers]
        self.ids = self.ids[:keep]
        cache = self.view(keep)
        new = torch.tensor([ids[keep:]], device=device_of(self.model))
        weights = contextlib.nullcontext() if self.adapted else base_weights(self.model)
        with torch.no_grad(), weights:
            self.model(input_ids=new, cache=cache, use_cache=True, logits_to_keep=1)
        self.layers = [(layer.keys, layer.values) for layer in cache.layers]
        self.ids = list(ids)
        self.computed += len(ids) - keep

    def view(self, length: int) -> Any:
        """A new cache holding the first `length` tokens (at most those held); running the model on
        it leaves this one as it is."""
        from transformers import DynamicCache

        if length > len(self.ids):
            raise ValueError(f"the cache holds {len(self.ids)} tokens, not {length}")
        if length == 0 or not self.layers:
            return DynamicCache()
        return DynamicCache(ddp_cache_data=[(k[..., :length, :], v[..., :length, :]) for k, v in self.layers])


def completion_logits(model: Any, ids: list[int], count: int, cache: Any = None, start: int = 0) -> torch.Tensor:
    """Logits [count, V] predicting the last `count` tokens of `ids`, running the model on
    ids[start:] after `cache` (which holds ids[:start])."""
    import torch

    inputs = torch.tensor([ids[start:-1]], device=device_of(model))
    out = model(input_ids=inputs, cache=cache, use_cache=cache is not None, logits_to_keep=count)
    return out.logits[0]


def teacher_logits(model: Any, prefix: PrefixCache, rendered: Rendered, completion: list[int]) -> torch.Tensor:
    """The frozen base model's logits for `completion` after the teacher prompt (no gradient)."""
    import torch

    prefix.extend(rendered.teacher[: rendered.shared])
    with torch.no_grad(), base_weights(model):
        return completion_logits(
            model, rendered.teacher + completion, len(completion), prefix.view(rendered.shared), rendered.shared
        )


def window_start(rendered: Rendered, completion: list[int], window: int | None) -> int:
    """Where the part of the student's sequence that runs with gradients begins: the last
    `window` tokens, never past the prompt it shares with the teacher; 0 for no window."""
    if window is None:
        return 0
    return max(0, min(len(rendered.prompt) + len(completion) - 1 - window, rendered.shared))


@dataclass(frozen=True)
class PairScore:
    id: str
    session_id: str
    student: list[float]  # log p(completion token) under the prompt
    teacher: list[float]  # the same under the teacher prompt
    divergence: float  # mean per-token student->teacher divergence

    @property
    def gap(self) -> float:
        """Mean teacher minus student log-probability of the completion's tokens: negative when
        the hint makes the failed reply less likely, as self-distillation needs."""
        return (sum(self.teacher) - sum(self.student)) / max(1, len(self.student))


def score(
    model: Any,
    tokenizer: Any,
    records: Iterable[dict[str, Any]],
    *,
    hint: str = "feedback",
    top_k: int = 20,
    alpha: float = 0.5,
    max_completion_tokens: int | None = None,
) -> list[PairScore]:
    """Each record's completion scored under its prompt (the model as it is) and its teacher
    prompt (the model with its adapters off), exactly: no window, prefixes cached per weights."""
    import torch

    student_prefix = PrefixCache(model, adapted=True)
    teacher_prefix = PrefixCache(model) if hasattr(model, "disable_adapter") else student_prefix  # one set of weights
    scores = []
    for record in records:
        rendered = render(record, tokenizer, hint)
        completion = rendered.completion[:max_completion_tokens]
        if not completion:
            continue
        shared = rendered.shared
        student_prefix.extend(rendered.prompt[:shared])
        with torch.no_grad():
            student = completion_logits(
                model, rendered.prompt + completion, len(completion), student_prefix.view(shared), shared
            )
        teacher = teacher_logits(model, teacher_prefix, rendered, completion)
        ids = torch.tensor(completion, device=student.device)
        scores.append(
            PairScore(
                id=str(record.get("id")),
                session_id=str(record.get("session_id")),
                student=token_logprobs(student, ids).tolist(),
                teacher=token_logprobs(teacher, ids).tolist(),
                divergence=float(topk_divergence(student, teacher, top_k=top_k, alpha=alpha).mean()),
            )
        )
    return scores


def sequence_logprobs(model: Any, tokenizer: Any, records: Iterable[dict[str, Any]], **options: Any) -> list[PairScore]:
    """Per-token log-probabilities of each record's completion under its prompt (`.student`) and
    its teacher prompt (`.teacher`)."""
    return score(model, tokenizer, records, **options)


def divergence(model: Any, tokenizer: Any, records: Iterable[dict[str, Any]], **options: Any) -> float:
    """Mean per-token student->teacher divergence over all the records' completion tokens."""
    scores = score(model, tokenizer, records, **options)
    tokens = sum(len(s.student) for s in scores)
    return sum(s.divergence * len(s.student) for s in scores) / max(1, tokens)


def token_logprobs_of(model: Any, prompt: list[int], completion: list[int]) -> list[float]:
    """log p(completion[t] | prompt, completion[:t]) under the model as it is."""
    import torch

    with torch.no_grad():
        logits = completion_logits(model, prompt + completion, len(completion))
    return token_logprobs(logits, torch.tensor(completion, device=logits.device)).tolist()


def device_of(model: Any) -> torch.device:
    return next(model.parameters()).device
