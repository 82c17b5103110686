"""Each objective's loss against values computed by hand (plain floats) on tiny logits."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from trainer.losses import (  # noqa: E402
    divergence,
    dpo_loss,
    importance_weights,
    sdpo_loss,
    sft_loss,
    topk_divergence,
)

STUDENT = [2.0, 1.0, 0.0, -1.0]
TEACHER = [0.0, 2.0, 1.0, 0.0]


def softmax(logits: list[float]) -> list[float]:
    z = sum(math.exp(x) for x in logits)
    return [math.exp(x) / z for x in logits]


def buckets(logits: list[float], support: list[int]) -> list[float]:
    """Probabilities of the support's tokens, then the rest of the mass in one tail bucket."""
    p = softmax(logits)
    kept = [p[i] for i in support]
    return [*kept, 1.0 - sum(kept)]


def kl(p: list[float], q: list[float]) -> float:
    return sum(a * math.log(a / b) for a, b in zip(p, q))


def hand_divergence(alpha: float, support: list[int] = [0, 1]) -> float:  # noqa: B006
    s, t = buckets(STUDENT, support), buckets(TEACHER, support)
    if alpha == 0.0:
        return kl(t, s)
    if alpha == 1.0:
        return kl(s, t)
    m = [(1 - alpha) * a + alpha * b for a, b in zip(s, t)]
    return (1 - alpha) * kl(s, m) + alpha * kl(t, m)


def logits(*rows: list[float]) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


@pytest.mark.parametrize("alpha", [0.0, 0.5, 1.0, 0.25])
def test_top2_divergence_with_a_tail_bucket_matches_the_hand_computed_value(alpha: float) -> None:
    got = topk_divergence(logits(STUDENT), logits(TEACHER), top_k=2, alpha=alpha)
    assert got.shape == (1,)
    assert got.item() == pytest.approx(hand_divergence(alpha), rel=1e-9)


def test_the_support_is_the_students_top_k_not_the_teachers() -> None:
    # The teacher's top two are tokens 1 and 2; the student's are 0 and 1.
    got = topk_divergence(logits(STUDENT), logits(TEACHER), top_k=2, alpha=1.0).item()
    assert got == pytest.approx(hand_divergence(1.0, [0, 1]))
    assert got != pytest.approx(hand_divergence(1.0, [1, 2]))


def test_a_top_k_as_large_as_the_vocabulary_is_the_full_divergence() -> None:
    got = topk_divergence(logits(STUDENT), logits(TEACHER), top_k=50, alpha=0.0).item()
    assert got == pytest.approx(kl(softmax(TEACHER), softmax(STUDENT)), rel=1e-6)


def test_divergence_refuses_an_alpha_outside_zero_to_one() -> None:
    p = logits([0.0, 0.0]).log_softmax(-1)
    with pytest.raises(ValueError, match="between 0"):
        divergence(p, p, 1.5)


def test_sdpo_loss_is_the_token_mean_and_only_the_student_gets_a_gradient() -> None:
    student = logits(STUDENT, TEACHER).requires_grad_()
    teacher = logits(TEACHER, TEACHER).requires_grad_()
    ids = torch.tensor([0, 1])
    loss = sdpo_loss(student, teacher, ids, top_k=2, alpha=0.5)
    assert loss.item() == pytest.approx(hand_divergence(0.5) / 2)  # the second token: student == teacher
    loss.backward()
    assert teacher.grad is None
    assert student.grad is not None and student.grad[0].abs().sum() > 0


def test_importance_ratio_weights_tokens_and_is_clipped_above() -> None:
    student, teacher, ids = logits(STUDENT, STUDENT), logits(TEACHER, TEACHER), torch.tensor([0, 0])
    own = math.log(softmax(STUDENT)[0])
    sampler = torch.tensor([own - math.log(1.5), own + math.log(4.0)], dtype=torch.float64)  # ratios 1.5 and 0.25
    weights = importance_weights(torch.tensor([own, own], dtype=torch.float64), sampler, clip=1.2)
    assert weights.tolist() == pytest.approx([1.2, 0.25])
    loss = sdpo_loss(student, teacher, ids, top_k=2, alpha=1.0, sampler_logp=sampler, is_clip=1.2)
    assert loss.item() == pytest.approx(hand_divergence(1.0) * (1.2 + 0.25) / 2)
    unweighted = sdpo_loss(student, teacher, ids, top_k=2, alpha=1.0, sampler_logp=sampler, is_clip=None)
    assert unweighted.item() == pytest.approx(hand_divergence(1.0))


def test_sft_loss_is_the_mean_negative_log_likelihood_of_the_targets() -> None:
    got = sft_loss(logits(STUDENT, TEACHER), torch.tensor([1, 2])).item()
    expected = -(math.log(softmax(STUDENT)[1]) + math.log(softmax(TEACHER)[2])) / 2
    assert got == pytest.approx(expected)


def test_dpo_loss_is_the_sigmoid_loss_of_the_reward_margin() -> None:
    got = dpo_loss(torch.tensor(-1.0), torch.tensor(-3.0), torch.tensor(-2.0), torch.tensor(-2.0), beta=0.1).item()
    margin = (-1.0 - -2.0) - (-3.0 - -2.0)  # 2.0
    assert got == pytest.approx(-math.log(1 / (1 + math.exp(-0.1 * margin))))
    assert dpo_loss(torch.tensor(-3.0), torch.tensor(-1.0), torch.tensor(-2.0), torch.tensor(-2.0)).item() > got
