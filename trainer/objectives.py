"""One example's loss under each objective, on the model being trained.

- sdpo: the student (the model under the recorded prompt) is pulled toward the teacher (the frozen
  base, or an EMA of the student, under the prompt with the hint) on the student's own failed
  reply: top-k divergence with a tail bucket, each token weighted by the clipped importance ratio
  against the sampler's recorded log-probabilities.
- sft: the negative log-likelihood of the correction after the prompt.
- dpo: the correction preferred to the failed reply, against the frozen base as reference, plus
  `dpo_nll` times the correction's mean negative log-likelihood (as RPO: plain DPO on a small model
  tends to lower the chosen reply's likelihood along with the rejected one's).
- mix: sdpo on every pair, plus sft (weighted `mix_sft`) where there is a correction.

Speed on a CPU: the frozen base's keys and values of the prompt are computed once per session
prefix (scoring.PrefixCache); the student runs with gradients only on the last `window` tokens of
its sequence and reads the tokens before them from that cache. At the first step that is exact
(the LoRA update starts at zero); later the student sees the base's keys and values for those
early tokens rather than its own, and gets no gradient through them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainer.data import Example
from trainer.losses import dpo_loss, sdpo_loss, sft_loss, token_logprobs
from trainer.scoring import PrefixCache, base_weights, completion_logits, teacher_logits, window_start

OBJECTIVES = ("sdpo", "sft", "dpo", "mix")
TEACHERS = ("base", "ema")

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Options:
    objective: str
    top_k: int
    alpha: float
    is_clip: float | None
    window: int | None
    dpo_beta: float
    mix_sft: float
    dpo_nll: float = 0.0


class Objective:
    """Losses of examples for `model`, the peft model trained; `ema` holds the EMA teacher's
    adapter weights, if any."""

    def __init__(self, model: Any, options: Options, ema: dict[str, torch.Tensor] | None = None) -> None:
        self.model, self.options, self.ema = model, options, ema
        self.prefix = PrefixCache(model)
        self.computed = 0  # tokens the student ran with gradients
        self.gaps: list[float] = []  # per pair: mean teacher minus student log-probability of the failed tokens

    def loss(self, example: Example) -> torch.Tensor:
        objective = self.options.objective
        if objective == "sdpo":
            return self.sdpo(example)
        if objective == "sft":
            return self.sft(example)
        if objective == "dpo":
            return self.dpo(example)
        if example.chosen is None:  # mix
            return self.sdpo(example)
        if not example.distil:
            return self.sft(example)
        return (1 - self.options.mix_sft) * self.sdpo(example) + self.options.mix_sft * self.sft(example)

    def sdpo(self, example: Example) -> torch.Tensor:
        import torch

        rendered, completion = example.rendered, example.completion
        if self.ema is None:
            teacher = teacher_logits(self.model, self.prefix, rendered, completion)
        else:
            teacher = self._ema_teacher(example)
        student = self._student(example, completion)
        ids = self._ids(completion, student)
        with torch.no_grad():
            self.gaps.append(float((token_logprobs(teacher, ids) - token_logprobs(student, ids)).mean()))
        sampler = None
        if example.sampler_logprobs is not None:
            sampler = torch.tensor(example.sampler_logprobs, device=student.device, dtype=student.dtype)
        return sdpo_loss(
            student,
            teacher,
            ids,
            top_k=self.options.top_k,
            alpha=self.options.alpha,
            sampler_logp=sampler,
            is_clip=self.options.is_clip,
        )

    def sft(self, example: Example) -> torch.Tensor:
        chosen = example.chosen or []
        logits = self._student(example, chosen)
        return sft_loss(logits, self._ids(chosen, logits))

    def dpo(self, example: Example) -> torch.Tensor:
        chosen, rejected = example.chosen or [], example.rejected or example.completion
        logits = [self._student(example, reply) for reply in (chosen, rejected)]
        policy = [self._sequence_logp(lg, reply) for lg, reply in zip(logits, (chosen, rejected), strict=True)]
        reference = [self._sequence_logp(self._reference(example, reply), reply) for reply in (chosen, rejected)]
        loss = dpo_loss(policy[0], policy[1], reference[0], reference[1], beta=self.options.dpo_beta)
        if self.options.dpo_nll:
            loss = loss + self.options.dpo_nll * sft_loss(logits[0], self._ids(chosen, logits[0]))
        return loss

    def base_gap(self, example: Example) -> float:
        """The frozen base's teacher-minus-student gap on the failed reply (log-probability): what
        the pair would teach before any step. Negative: the teacher, told what it is told, finds the
        failure less likely, and distillation moves the student away from it; zero or positive: it
        would pull the student toward the mistake. Without a demonstration, the mean over the
        failure's tokens. With one, the gap at the token where the failure parts from it: before
        that token the two are the same text, and after it a teacher shown a call finds any call
        of that shape likelier (measured on the embedded model: +0.5 to +3.9 nats on the format
        tokens of a failure, whatever it makes of the wrong argument). A failure that is the
        demonstration itself has no such token, and gap 0."""
        import torch

        rendered, completion = example.rendered, example.completion
        if rendered.decides is not None and rendered.decides >= len(completion):
            return 0.0
        teacher = teacher_logits(self.model, self.prefix, rendered, completion)
        self.prefix.extend(rendered.prompt[: rendered.shared])
        with torch.no_grad(), base_weights(self.model):
            student = completion_logits(
                self.model,
                rendered.prompt + completion,
                len(completion),
                self.prefix.view(rendered.shared),
                rendered.shared,
            )
            ids = self._ids(completion, student)
            gap = token_logprobs(teacher, ids) - token_logprobs(student, ids)
            return float(gap.mean() if rendered.decides is None else gap[rendered.decides])

    def _student(self, example: Example, reply: list[int]) -> torch.Tensor:
        """The trained model's logits for `reply` after the prompt: gradients on the window only."""
        rendered = example.rendered
        start = window_start(rendered, reply, self.options.window)
        cache = None
        if start:
            self.prefix.extend(rendered.prompt[: rendered.shared])
            cache = self.prefix.view(start)
        self.computed += len(rendered.prompt) + len(reply) - 1 - start
        return completion_logits(self.model, rendered.prompt + reply, len(reply), cache, start)

    def _reference(self, example: Example, reply: list[int]) -> torch.Tensor:
        import torch

        rendered = example.rendered
        self.prefix.extend(rendered.prompt[: rendered.shared])
        with torch.no_grad(), base_weights(self.model):
            return completion_logits(
                self.model, rendered.prompt + reply, len(reply), self.prefix.view(rendered.shared), rendered.shared
            )

    def _ema_teacher(self, example: Example) -> torch.Tensor:
        """The EMA adapter's logits after the teacher prompt, over the student's window (its
        weights change every step, so only the base's cached prefix is reused)."""
        import torch

        rendered, completion = example.rendered, example.completion
        start = window_start(rendered, completion, self.options.window)
        cache = None
        if start:
            self.prefix.extend(rendered.teacher[: rendered.shared])
            cache = self.prefix.view(start)
        with torch.no_grad(), swapped(self.model, self.ema or {}):
            return completion_logits(self.model, rendered.teacher + completion, len(completion), cache, start)

    @staticmethod
    def _ids(ids: list[int], logits: torch.Tensor) -> torch.Tensor:
        import torch

        return torch.tensor(ids, device=logits.device)

    def _sequence_logp(self, logits: torch.Tensor, ids: list[int]) -> torch.Tensor:
        return token_logprobs(logits, self._ids(ids, logits)).sum()


def trainable(model: Any) -> dict[str, torch.nn.Parameter]:
    return {name: p for name, p in model.named_parameters() if p.requires_grad}


@contextlib.contextmanager
def swapped(model: Any, weights: dict[str, torch.Tensor]) -> Iterator[None]:
    """The trainable parameters' values replaced by `weights` for the duration."""
    params = trainable(model)
    saved = {name: params[name].data for name in weights}
    for name, value in weights.items():
        params[name].data = value
    try:
        yield
    finally:
        for name, value in saved.items():
            params[name].data = value


def ema_start(model: Any) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in trainable(model).items()}


def ema_update(ema: dict[str, torch.Tensor], model: Any, decay: float) -> None:
    for name, p in trainable(model).items():
        ema[name].mul_(decay).add_(p.detach(), alpha=1 - decay)
