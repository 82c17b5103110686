"""The training objectives, as pure functions of logits: no model, no data, no state.

Shapes: `[..., T, V]` logits for the T completion positions of one sequence (or a batch of them),
`[..., T]` token ids and per-token values. The self-distillation divergence follows TRL's
experimental SDPO (`trl/experimental/sdpo/loss_utils.py`) and lasgroup/SDPO's
`compute_self_distillation_loss`: the student's top-k tokens plus one tail bucket, then

- alpha = 0: forward KL, KL(teacher || student);
- alpha = 1: reverse KL, KL(student || teacher);
- 0 < alpha < 1: the generalized Jensen-Shannon divergence with mixture
  M = (1 - alpha) * student + alpha * teacher: (1 - alpha) * KL(student || M) + alpha * KL(teacher || M)
  (alpha = 0.5 is the Jensen-Shannon divergence; it tends to 0, not to a KL, at either end).

Like every trainer module, this one imports torch only when a function runs: importing the trainer
(its command line, from an agent installed without the `train` extra) loads no training stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

LOG_RATIO_LIMIT = 20.0  # the importance ratio's log is clamped here before exp (as TRL and verl do)


def divergence(student_logp: torch.Tensor, teacher_logp: torch.Tensor, alpha: float) -> torch.Tensor:
    """Per-position divergence between two log-distributions over the last dimension."""
    import torch
    import torch.nn.functional as F

    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be between 0 (forward KL) and 1 (reverse KL), got {alpha}")
    if alpha == 0.0:
        terms = F.kl_div(student_logp, teacher_logp, reduction="none", log_target=True)
    elif alpha == 1.0:
        terms = F.kl_div(teacher_logp, student_logp, reduction="none", log_target=True)
    else:
        weight = torch.tensor(alpha, dtype=student_logp.dtype, device=student_logp.device)
        mixture = torch.logsumexp(
            torch.stack([student_logp + torch.log1p(-weight), teacher_logp + torch.log(weight)]), dim=0
        )
        to_student = F.kl_div(mixture, student_logp, reduction="none", log_target=True)
        to_teacher = F.kl_div(mixture, teacher_logp, reduction="none", log_target=True)
        terms = torch.lerp(to_student, to_teacher, weight)
    return terms.sum(-1)


def with_tail(logp: torch.Tensor) -> torch.Tensor:
    """Log-probabilities of a subset of a vocabulary, plus one bucket for the mass outside it."""
    import torch

    captured = torch.logsumexp(logp, dim=-1, keepdim=True).clamp(max=-1e-7)
    return torch.cat([logp, torch.log(-torch.expm1(captured))], dim=-1)


def topk_divergence(
    student_logits: torch.Tensor, teacher_logits: torch.Tensor, *, top_k: int, alpha: float
) -> torch.Tensor:
    """Per-position divergence over the student's `top_k` tokens and a tail bucket. The teacher
    gets no gradient; the support is chosen by the student's logits (indices carry no gradient)."""
    k = min(top_k, student_logits.shape[-1])
    student_all = _wide(student_logits).log_softmax(-1)
    teacher_all = _wide(teacher_logits.detach()).log_softmax(-1)
    support = student_all.detach().topk(k, dim=-1).indices
    student = with_tail(student_all.gather(-1, support))
    teacher = with_tail(teacher_all.gather(-1, support))
    return divergence(student, teacher, alpha)


def token_logprobs(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """log p(ids[t]) under logits[t]."""
    return _wide(logits).log_softmax(-1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def importance_weights(student_logp: torch.Tensor, sampler_logp: torch.Tensor, clip: float) -> torch.Tensor:
    """pi_student / pi_sampler per sampled token, clipped above at `clip`; no gradient."""
    log_ratio = (student_logp.detach() - sampler_logp).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
    return log_ratio.exp().clamp(max=clip)


def sdpo_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    completion_ids: torch.Tensor,
    *,
    top_k: int = 20,
    alpha: float = 0.5,
    sampler_logp: torch.Tensor | None = None,
    is_clip: float | None = None,
) -> torch.Tensor:
    """Mean over the completion's tokens of the student->teacher divergence, each token weighted by
    the clipped importance ratio when the sampler's log-probabilities are given."""
    per_token = topk_divergence(student_logits, teacher_logits, top_k=top_k, alpha=alpha)
    if sampler_logp is not None and is_clip is not None:
        per_token = per_token * importance_weights(
            token_logprobs(student_logits, completion_ids), sampler_logp, is_clip
        )
    return per_token.mean(-1)


def sft_loss(logits: torch.Tensor, target_ids: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood of the target tokens."""
    return -token_logprobs(logits, target_ids).mean(-1)


def dpo_loss(
    chosen_logp: torch.Tensor,
    rejected_logp: torch.Tensor,
    reference_chosen_logp: torch.Tensor,
    reference_rejected_logp: torch.Tensor,
    *,
    beta: float = 0.1,
) -> torch.Tensor:
    """The sigmoid DPO loss on summed sequence log-probabilities (the reference is the frozen base)."""
    import torch.nn.functional as F

    margin = (chosen_logp - reference_chosen_logp) - (rejected_logp - reference_rejected_logp)
    return -F.logsigmoid(beta * margin)


def _wide(logits: torch.Tensor) -> torch.Tensor:
    """Half-precision logits in float32 for the softmax; float32 and float64 as they are."""
    import torch

    return logits if logits.dtype in (torch.float32, torch.float64) else logits.float()
