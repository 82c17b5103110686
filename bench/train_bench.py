"""Training speed on a CPU: teachback's SDPO trainer beside a plain PyTorch loop on the same pairs.

In one run, on the same pairs in the same order, with the same LoRA and loss:

- teachback: `trainer.train` (the frozen teacher's prompt prefix computed once per session
  prefix, gradients on the last --max-tokens tokens of each sequence, the rest read from that cache),
  once per --windows value (`none`: whole sequences with gradients, only the teacher cached);
- plain: for each pair, the teacher's forward over its whole prompt and the completion, and the
  student's forward and backward over its whole prompt and the completion.

Prints tokens per second (the pairs' full student and teacher sequences per second of training,
the same count for every row), seconds per pair, the projected time of a 200-pair round, and how far
the windowed student's log-probabilities of the failed tokens are from the exact ones after
training (the window's approximation).

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python bench/train_bench.py [--data FILE ...] [--pairs N]
        [--windows 384,128,none] [--plain-pairs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # spinning OpenMP waits cost 4x on shared cores

DEMO = Path(__file__).resolve().parent.parent / "tests" / "train" / "data" / "demo_pairs.jsonl"
ROUND = 200  # pairs in a round of `teachback learn`
BUDGET_MINUTES = 30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", default=[DEMO], help="sdpo export files (default: demo pairs)")
    parser.add_argument("--base", default=None, help="base model (default: the embedded one)")
    parser.add_argument("--pairs", type=int, default=None, help="train on the first N pairs (default: all)")
    parser.add_argument("--windows", default="384", help="comma-separated --max-tokens values to time (none: exact)")
    parser.add_argument("--plain-pairs", type=int, default=None, help="time the plain loop on N pairs (default: all)")
    parser.add_argument("--batch-size", type=int, default=4)
    args = parser.parse_args()

    import torch

    from trainer.data import read_records

    records = read_records(args.data)[: args.pairs]
    with tempfile.TemporaryDirectory(prefix="train-bench-") as tmp:
        data = Path(tmp) / "pairs.jsonl"
        data.write_text("".join(_line(r) for r in records))
        print(
            f"{len(records)} pairs in {len({r['session_id'] for r in records})} sessions; torch threads "
            f"{torch.get_num_threads()}, load average {os.getloadavg()[0]:.1f}"
        )
        rows = []
        for window in args.windows.split(","):
            rows.append(_ours(data, Path(tmp) / f"w{window}", args, None if window == "none" else int(window)))
        rows.append(_plain(data, args))
    print(f"\n{'trainer':34} {'tokens/s':>9} {'s/pair':>8} {f'{ROUND} pairs':>10}   note")
    for name, speed, per_pair, note in rows:
        print(f"{name:34} {speed:9.0f} {per_pair:8.1f} {per_pair * ROUND / 60:8.1f} m   {note}")
    fastest = min(row[2] for row in rows[:-1])
    print(
        f"\nteachback is {rows[-1][2] / fastest:.1f}x the plain loop; a {ROUND}-pair round is projected at "
        f"{fastest * ROUND / 60:.0f} min ({BUDGET_MINUTES} min budget) at this machine's load."
    )


def _line(record: dict) -> str:
    import json

    return json.dumps(record, ensure_ascii=False) + "\n"


def _ours(data: Path, out: Path, args: argparse.Namespace, window: int | None) -> tuple[str, float, float, str]:
    from trainer.train import TrainConfig, train

    pairs = sum(1 for _ in data.open())
    config = TrainConfig(
        data=[data],
        out=out,
        base=args.base,
        max_tokens=window,
        batch_size=args.batch_size,
        steps=-(-pairs // args.batch_size),
        checkpoint_every=10**6,
    )
    result = train(config)
    seconds = result.metrics["train_seconds"]
    drift = _window_drift(data, out, args.base, window) if window is not None else 0.0
    note = (
        f"{result.metrics['student_tokens_computed']} student and {result.metrics['prefix_tokens_computed']} "
        f"prefix tokens computed; loss {result.losses[0]:.4f} -> {result.losses[-1]:.4f}"
    )
    if window is not None:
        note += f"; window vs exact after training: {drift:.4f} nats/token"
    label = f"teachback, window {window}" if window is not None else "teachback, whole sequences"
    return label, result.tokens_per_second, seconds / pairs, note


def _window_drift(data: Path, adapter: Path, base: str | None, window: int) -> float:
    """Mean |log p windowed - log p exact| of the failed tokens under the trained adapter."""
    import torch

    from trainer.data import load_examples, read_records
    from trainer.losses import token_logprobs
    from trainer.scoring import PrefixCache, completion_logits, load, window_start

    model, tokenizer = load(base, adapter)
    examples = load_examples(
        read_records([data]), tokenizer, objective="sdpo", hint="feedback", max_completion_tokens=256
    ).examples
    prefix, gaps = PrefixCache(model), []
    with torch.no_grad():
        for example in examples:
            r, completion = example.rendered, example.completion
            ids = torch.tensor(completion)
            start = window_start(r, completion, window)
            prefix.extend(r.prompt[: r.shared])
            windowed = completion_logits(model, r.prompt + completion, len(completion), prefix.view(start), start)
            exact = completion_logits(model, r.prompt + completion, len(completion))
            gaps.append(float((token_logprobs(windowed, ids) - token_logprobs(exact, ids)).abs().mean()))
    return statistics.mean(gaps)


def _plain(data: Path, args: argparse.Namespace) -> tuple[str, float, float, str]:
    """The same pairs, loss and LoRA, each sequence run whole: no cache, no window."""
    import torch
    from peft import LoraConfig, get_peft_model

    from trainer.data import load_examples, read_records
    from trainer.losses import sdpo_loss
    from trainer.scoring import base_weights, completion_logits, load
    from trainer.train import ATTENTION, TrainConfig, _sequence_tokens

    defaults = TrainConfig(data=[data], out=data)
    torch.manual_seed(defaults.seed)
    model, tokenizer = load(args.base)
    model = get_peft_model(
        model,
        LoraConfig(
            r=defaults.lora_r,
            lora_alpha=defaults.lora_alpha,
            lora_dropout=0.0,
            target_modules=ATTENTION,
            task_type="CAUSAL_LM",
        ),
    )
    model.train()
    examples = load_examples(
        read_records([data]),
        tokenizer,
        objective="sdpo",
        hint=defaults.hint,
        max_completion_tokens=defaults.max_completion_tokens,
    ).examples[: args.plain_pairs]
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=defaults.lr)
    tokens, started = 0, time.perf_counter()
    for i, example in enumerate(examples):
        r, completion = example.rendered, example.completion
        with torch.no_grad(), base_weights(model):
            teacher = completion_logits(model, r.teacher + completion, len(completion))
        student = completion_logits(model, r.prompt + completion, len(completion))
        sampler = torch.tensor(example.sampler_logprobs) if example.sampler_logprobs else None
        loss = sdpo_loss(
            student,
            teacher,
            torch.tensor(completion),
            top_k=defaults.top_k,
            alpha=defaults.alpha,
            sampler_logp=sampler,
            is_clip=defaults.is_clip,
        )
        (loss / args.batch_size).backward()
        if (i + 1) % args.batch_size == 0 or i == len(examples) - 1:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        tokens += _sequence_tokens(example, "sdpo")
    seconds = time.perf_counter() - started
    return "plain PyTorch forward/backward", tokens / seconds, seconds / len(examples), f"{len(examples)} pairs"


if __name__ == "__main__":
    main()
