"""`teachback train`: a LoRA adapter trained on exported feedback pairs; and what train, eval and
learn share (the `train` extra they need, the options of a held-out evaluation)."""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import sys
from collections.abc import Callable
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from common.progress import progress_bar

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
TRAIN_STACK = ("torch", "transformers", "peft", "accelerate")
INSTALL_HINT = (
    "the trainer needs the `train` extra: install torch==2.13.0 (a CPU build: --index-url "
    "https://download.pytorch.org/whl/cpu), then pip install 'teachback[train]'"
)


def needs_train_stack(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`run` when the `train` extra is installed (state replay runs on llama.cpp alone); the
    trainer's own errors become one line and the usage exit status."""

    @functools.wraps(run)
    def guarded(args: argparse.Namespace) -> int:
        missing = [name for name in TRAIN_STACK if importlib.util.find_spec(name) is None]
        if missing and not (args.command == "eval" and getattr(args, "states", None)):
            print(f"teachback {args.command}: {', '.join(missing)} not installed; {INSTALL_HINT}.", file=sys.stderr)
            return EXIT_USAGE
        from trainer.data import TrainError
        from trainer.weights import WeightsError

        try:
            return run(args)
        except (TrainError, WeightsError) as exc:
            print(f"teachback {args.command}: {exc}", file=sys.stderr)
            return EXIT_USAGE

    return guarded


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    parser.description = (
        "Train a LoRA adapter on exported feedback pairs (teachback export --format sdpo). On "
        "several GPUs: accelerate launch --multi_gpu --num_processes N -m trainer train ...; "
        "several CPU processes: ACCELERATE_USE_CPU=1 torchrun --nproc_per_node N -m trainer train ..."
    )
    parser.add_argument(
        "--data",
        type=Path,
        nargs="+",
        required=True,
        metavar="FILE",
        help="sdpo export files, or the sft/dpo/sdpo files of `teachback tasks branch` (JSONL)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="DIR",
        help="adapter folder (peft) with teachback_train.json; checkpoints go in DIR/checkpoints",
    )
    parser.add_argument(
        "--objective",
        choices=("sdpo", "sft", "dpo", "mix"),
        help="sdpo: self-distillation on the failed reply (default); sft: learn the corrections (or a "
        "branch file's verified successes); dpo: correction over failed reply, plus --dpo-nll on the "
        "correction; mix: sdpo plus sft where there is a correction",
    )
    parser.add_argument("--base", help="local/smollm2 (default), a .gguf file, or a local Hugging Face model folder")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--steps", type=int, help="optimizer steps (default: --epochs passes over the pairs)")
    parser.add_argument("--epochs", type=float)
    parser.add_argument("--lr", type=float)
    parser.add_argument("--lora-r", type=int)
    parser.add_argument("--lora-alpha", type=int)
    parser.add_argument("--top-k", type=int, help="the student's top tokens the divergence runs over")
    parser.add_argument("--alpha", type=float, help="0 forward KL (default), 0.5 Jensen-Shannon, 1 reverse KL")
    parser.add_argument(
        "--teacher",
        choices=("base", "ema"),
        help="base: the frozen base model; ema: an exponential moving average of the student",
    )
    parser.add_argument("--ema-decay", type=float)
    parser.add_argument(
        "--hint",
        choices=("feedback", "demonstration", "hindsight"),
        help="what the teacher is told: the feedback; a working reply and the feedback; or the "
        "export's hindsight (quotes the failed reply)",
    )
    parser.add_argument(
        "--is-clip",
        type=_optional(float),
        metavar="X|none",
        help="cap of the importance ratio against the recorded log-probabilities",
    )
    parser.add_argument(
        "--max-tokens",
        type=_optional(int),
        metavar="N|none",
        help="tokens per sequence run with gradients (the rest from the frozen prefix cache)",
    )
    parser.add_argument("--max-completion-tokens", type=int)
    parser.add_argument("--batch-size", type=int, help="pairs per optimizer step")
    parser.add_argument("--grad-accum", type=int)
    parser.add_argument("--checkpoint-every", type=int, metavar="STEPS")
    parser.add_argument(
        "--no-resume", dest="resume", action="store_false", help="start over instead of resuming from DIR's checkpoints"
    )
    parser.add_argument("--dpo-beta", type=float)
    parser.add_argument("--dpo-nll", type=float, help="weight of the correction's NLL added to dpo (0: plain DPO)")
    parser.add_argument(
        "--no-gap-filter",
        dest="gap_filter",
        action="store_false",
        help="sdpo, mix: train pairs whose teacher finds the failed reply as likely as the student does",
    )
    parser.add_argument("--mix-sft", type=float, help="weight of sft in --objective mix")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    from trainer.train import TrainConfig  # imports no torch

    parser.set_defaults(**{f.name: f.default for f in fields(TrainConfig) if f.default is not MISSING})


@needs_train_stack
def train_main(args: argparse.Namespace) -> int:
    from trainer.train import TrainConfig, train

    options = {k: v for k, v in vars(args).items() if k not in ("json", "command")}
    config = TrainConfig(**options)
    with progress_bar("train", detail="loss {loss}  {speed} tok/s") as update:
        result = train(
            config,
            progress=lambda r: update(r.step, r.total, loss=f"{r.loss:.4f}", speed=f"{r.tokens_per_second:.0f}"),
        )
    if args.json:
        print(
            json.dumps(
                {
                    "adapter_dir": str(result.adapter_dir),
                    "steps": result.steps,
                    "losses": result.losses,
                    "tokens_per_second": result.tokens_per_second,
                    "seconds": result.seconds,
                    "metrics": result.metrics,
                }
            )
        )
        return EXIT_OK
    first, last = (result.losses[0], result.losses[-1]) if result.losses else (float("nan"), float("nan"))
    print(
        f"trained {result.steps} steps in {result.seconds:.0f} s ({result.tokens_per_second:.0f} tokens/s); "
        f"loss {first:.4f} -> {last:.4f}; adapter in {result.adapter_dir}"
    )
    return EXIT_OK


def _optional(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        return None if text.lower() == "none" else kind(text)

    parse.__name__ = kind.__name__
    return parse


def add_held_out_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base", help="the adapter's base (default: the one it was trained on)")
    parser.add_argument(
        "--serve",
        metavar="MODEL",
        help="the GGUF model llama.cpp serves the adapter on (a .gguf file or smollm2; default: the base's own GGUF)",
    )
    parser.add_argument("--db", type=Path, help="feedback database (default: the configured one)")
    parser.add_argument("--test-fraction", type=float, default=0.2, help="sessions held out, by hash (default 0.2)")
    parser.add_argument("--tasks", type=Path, metavar="FILE", help="held-out task file (default: the sample suite)")
    parser.add_argument("--attempts", type=int, default=1, help="attempts per held-out task and model (default 1)")
    parser.add_argument("--max-steps", type=int, help="agent steps per attempt (default: max_steps)")
    parser.add_argument("--max-time", type=float, help="agent seconds per attempt (default: max_time)")
    parser.add_argument(
        "--parallel", type=int, default=1, help="attempts at once (default 1); on Ray, sessions replayed at once too"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def database(given: Path | None) -> Path:
    if given is not None:
        return given
    from agent.config import load_settings

    return load_settings(Path.cwd()).db_path()


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
