"""Training speed on a CPU: teachback's SDPO step beside a plain PyTorch step on the same pairs.

In one run, on the same pairs in the trainer's order, each variant with its own copy of the same
LoRA model (same seed) and optimizer, interleaved pair by pair (the variants take turns going
first) so that the load of a shared machine falls on all of them alike:

- teachback (`trainer.objectives.Objective`, what `teachback train` runs per pair): the frozen
  teacher's prompt prefix computed once per session prefix, the student's gradients on the last
  N tokens of its sequence (--windows), the tokens before them read from that cache;
- plain: the teacher's forward over its whole prompt and the completion, the student's forward and
  backward over its whole prompt and the completion.

Prints tokens per second (the pairs' full student and teacher sequences per second, the same count
for every variant), seconds per pair, the projected time of a 200-pair round, and, for each window,
how far the windowed student's log-probabilities of the failed tokens are from the exact ones after
the run (the window's approximation). With --end-to-end, also one `trainer.train` run (rendering,
loading and saving excluded from its tokens per second).

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python bench/train_bench.py [--data FILE ...] [--pairs N]
        [--windows 128,384] [--end-to-end]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # spinning OpenMP waits cost 4x on shared cores

DEMO = Path(__file__).resolve().parent.parent / "tests" / "train" / "data" / "demo_pairs.jsonl"
ROUND = 200  # pairs in a round of `teachback learn`
BUDGET_MINUTES = 30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", default=[DEMO], help="sdpo export files (default: demo pairs)")
    parser.add_argument("--base", default=None, help="base model (default: the embedded one)")
    parser.add_argument("--pairs", type=int, default=None, help="the first N pairs in training order (default: all)")
    parser.add_argument("--windows", default="128", help="comma-separated --max-tokens values to time")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--drift-pairs", type=int, default=6, help="pairs to measure each window's drift on")
    parser.add_argument("--end-to-end", action="store_true", help="also time one trainer.train run")
    args = parser.parse_args()

    import torch

    from trainer.data import epoch_order, load_examples, read_records
    from trainer.scoring import load
    from trainer.train import TrainConfig

    defaults = TrainConfig(data=args.data, out=Path("unused"))
    records = read_records(args.data)
    _, tokenizer = load(args.base)
    examples = load_examples(
        records, tokenizer, objective="sdpo", hint=defaults.hint, max_completion_tokens=defaults.max_completion_tokens
    ).examples
    examples = epoch_order(examples, defaults.seed, 0)[: args.pairs]
    sessions = len({e.session_id for e in examples})
    print(
        f"{len(examples)} pairs in {sessions} sessions; torch threads {torch.get_num_threads()}; "
        f"load average {os.getloadavg()[0]:.1f}"
    )

    variants = [_Variant(f"teachback, window {w}", args.base, defaults, int(w)) for w in args.windows.split(",")]
    variants.append(_Variant("plain PyTorch forward/backward", args.base, defaults, None))
    for start in range(0, len(examples), args.batch_size):
        batch = examples[start : start + args.batch_size]
        turn = start // args.batch_size
        for i, example in enumerate(batch):
            shift = (turn + i) % len(variants)
            for variant in variants[shift:] + variants[:shift]:
                variant.run(example, len(batch))
        for variant in variants:
            variant.step()
    tokens = sum(_sequence_tokens(e) for e in examples)
    print(f"\n{'variant':32} {'tokens/s':>9} {'s/pair':>7} {f'{ROUND} pairs':>10}   note")
    for variant in variants:
        per_pair = variant.seconds / len(examples)
        note = variant.note(examples[: args.drift_pairs])
        print(
            f"{variant.name:32} {tokens / variant.seconds:9.0f} {per_pair:7.1f} {per_pair * ROUND / 60:8.1f} m   {note}"
        )
    best = min(variants[:-1], key=lambda v: v.seconds)
    print(
        f"\n{best.name} is {variants[-1].seconds / best.seconds:.1f}x faster than the plain loop; a {ROUND}-pair "
        f"round ({len(examples) / sessions:.1f} pairs per session, as here) is projected at "
        f"{best.seconds / len(examples) * ROUND / 60:.0f} min at this machine's load ({BUDGET_MINUTES} min budget)."
    )
    if args.end_to_end:
        _end_to_end(args, examples, records)


class _Variant:
    """One way of training a pair: its own LoRA model, optimizer, and time spent."""

    def __init__(self, name: str, base: str | None, defaults: Any, window: int | None) -> None:
        import torch
        from peft import LoraConfig, get_peft_model

        from trainer.objectives import Objective, Options
        from trainer.scoring import load
        from trainer.train import ATTENTION

        torch.manual_seed(defaults.seed)
        model, _ = load(base)
        self.model = get_peft_model(
            model,
            LoraConfig(
                r=defaults.lora_r,
                lora_alpha=defaults.lora_alpha,
                lora_dropout=0.0,
                target_modules=ATTENTION,
                task_type="CAUSAL_LM",
            ),
        )
        self.model.train()
        self.optimizer = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad], lr=defaults.lr)
        self.name, self.window, self.defaults, self.seconds = name, window, defaults, 0.0
        self.objective = Objective(
            self.model,
            Options(
                "sdpo", defaults.top_k, defaults.alpha, defaults.is_clip, window, defaults.dpo_beta, defaults.mix_sft
            ),
        )
        self.loss: Callable[[Any], Any] = self.objective.loss if window is not None else self._plain_loss

    def run(self, example: Any, batch: int) -> None:
        started = time.perf_counter()
        (self.loss(example) / batch).backward()
        self.seconds += time.perf_counter() - started

    def step(self) -> None:
        started = time.perf_counter()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.seconds += time.perf_counter() - started

    def _plain_loss(self, example: Any) -> Any:
        import torch

        from trainer.losses import sdpo_loss
        from trainer.scoring import base_weights, completion_logits

        r, completion, d = example.rendered, example.completion, self.defaults
        with torch.no_grad(), base_weights(self.model):
            teacher = completion_logits(self.model, r.teacher + completion, len(completion))
        student = completion_logits(self.model, r.prompt + completion, len(completion))
        sampler = torch.tensor(example.sampler_logprobs) if example.sampler_logprobs else None
        return sdpo_loss(
            student,
            teacher,
            torch.tensor(completion),
            top_k=d.top_k,
            alpha=d.alpha,
            sampler_logp=sampler,
            is_clip=d.is_clip,
        )

    def note(self, examples: list[Any]) -> str:
        if self.window is None:
            return "whole sequences"
        return (
            f"{self.objective.prefix.computed} prefix and {self.objective.computed} student tokens computed; "
            f"window vs exact: {self._drift(examples):.4f} nats/token"
        )

    def _drift(self, examples: list[Any]) -> float:
        """Mean |log p windowed - log p exact| of the failed tokens under the weights trained."""
        import torch

        from trainer.losses import token_logprobs
        from trainer.scoring import completion_logits, window_start

        gaps = []
        with torch.no_grad():
            for example in examples:
                r, completion = example.rendered, example.completion
                ids = torch.tensor(completion)
                start = window_start(r, completion, self.window)
                self.objective.prefix.extend(r.prompt[: r.shared])
                cache = self.objective.prefix.view(start)
                windowed = completion_logits(self.model, r.prompt + completion, len(completion), cache, start)
                exact = completion_logits(self.model, r.prompt + completion, len(completion))
                gaps.append(float((token_logprobs(windowed, ids) - token_logprobs(exact, ids)).abs().mean()))
        return statistics.mean(gaps) if gaps else 0.0


def _sequence_tokens(example: Any) -> int:
    from trainer.train import sequence_tokens

    return sequence_tokens(example, "sdpo")


def _end_to_end(args: argparse.Namespace, examples: list[Any], records: list[dict]) -> None:
    import json

    from trainer.train import TrainConfig, train

    ids = {e.id for e in examples}
    with tempfile.TemporaryDirectory(prefix="train-bench-") as tmp:
        data = Path(tmp) / "pairs.jsonl"
        data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records if str(r.get("id")) in ids))
        window = int(args.windows.split(",")[0])
        result = train(
            TrainConfig(
                data=[data],
                out=Path(tmp) / "adapter",
                base=args.base,
                max_tokens=window,
                batch_size=args.batch_size,
                steps=-(-len(examples) // args.batch_size),
                checkpoint_every=10**6,
            )
        )
    m = result.metrics
    print(
        f"\nteachback train, window {window}: {result.tokens_per_second:.0f} tokens/s, "
        f"{m['train_seconds'] / len(examples):.1f} s/pair of training, {result.seconds:.0f} s in all; "
        f"loss {result.losses[0]:.4f} -> {result.losses[-1]:.4f}; teacher gap {m.get('teacher_gap', 0):+.3f}"
    )


if __name__ == "__main__":
    main()
