"""`teachback train | eval | learn`: their own argument parsers, so the `teachback` command imports
the trainer (and torch) only when one of them runs.

Each command registers `(add_arguments, run)` in COMMANDS; `run(args)` returns the exit code.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
TRAIN_STACK = ("torch", "transformers", "peft", "accelerate")
INSTALL_HINT = ("the trainer needs the `train` extra: install torch==2.13.0 (a CPU build: --index-url "
                "https://download.pytorch.org/whl/cpu), then pip install 'teachback[train]'")


def main(command: str, argv: list[str]) -> int:
    if command not in COMMANDS:
        print(f"teachback {command}: not in this version of the trainer (it has {', '.join(COMMANDS)}).",
              file=sys.stderr)
        return EXIT_USAGE
    add_arguments, run = COMMANDS[command]
    parser = argparse.ArgumentParser(prog=f"teachback {command}")
    add_arguments(parser)
    args = parser.parse_args(argv)
    missing = [name for name in TRAIN_STACK if importlib.util.find_spec(name) is None]
    if missing:
        print(f"teachback {command}: {', '.join(missing)} not installed; {INSTALL_HINT}.", file=sys.stderr)
        return EXIT_USAGE
    from trainer.data import TrainError
    from trainer.weights import WeightsError

    try:
        return run(args)
    except (TrainError, WeightsError) as exc:
        print(f"teachback {command}: {exc}", file=sys.stderr)
        return EXIT_USAGE


# ---------------------------------------------------------------------------------------------
# teachback train


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Train a LoRA adapter on exported feedback pairs (teachback export --format sdpo). Under "
                          "`accelerate launch -m agent.cli train ...` each process trains its share of every step.")
    parser.add_argument("--data", type=Path, nargs="+", required=True, metavar="FILE", help="sdpo export files (JSONL)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="adapter folder (peft) with teachback_train.json; checkpoints go in DIR/checkpoints")
    parser.add_argument("--objective", choices=("sdpo", "sft", "dpo", "mix"), default="sdpo",
                        help="sdpo: self-distillation on the failed reply (default); sft: learn the corrections; "
                        "dpo: correction over failed reply; mix: sdpo plus sft where there is a correction")
    parser.add_argument("--base", help="local/smollm2 (default), a .gguf file, or a local Hugging Face model folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, help="optimizer steps (default: --epochs passes over the pairs)")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--lora-r", type=int, default=16)
    parser.add_argument("--lora-alpha", type=int, default=32)
    parser.add_argument("--top-k", type=int, default=20, help="the student's top tokens the divergence runs over")
    parser.add_argument("--alpha", type=float, default=0.5, help="0 forward KL, 0.5 Jensen-Shannon, 1 reverse KL")
    parser.add_argument("--teacher", choices=("base", "ema"), default="base",
                        help="base: the frozen base model; ema: an exponential moving average of the student")
    parser.add_argument("--ema-decay", type=float, default=0.95)
    parser.add_argument("--hint", choices=("feedback", "demonstration", "hindsight"), default="feedback",
                        help="what the teacher is told: the feedback; a working reply and the feedback; or the "
                        "export's hindsight (quotes the failed reply)")
    parser.add_argument("--is-clip", type=_optional(float), default=2.0, metavar="X|none",
                        help="cap of the importance ratio against the recorded log-probabilities")
    parser.add_argument("--max-tokens", type=_optional(int), default=384, metavar="N|none",
                        help="tokens per sequence run with gradients (the rest from the frozen prefix cache)")
    parser.add_argument("--max-completion-tokens", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=4, help="pairs per optimizer step")
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--checkpoint-every", type=int, default=10, metavar="STEPS")
    parser.add_argument("--no-resume", dest="resume", action="store_false",
                        help="start over instead of resuming from DIR's checkpoints")
    parser.add_argument("--dpo-beta", type=float, default=0.1)
    parser.add_argument("--mix-sft", type=float, default=0.5, help="weight of sft in --objective mix")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def train_main(args: argparse.Namespace) -> int:
    from trainer.train import TrainConfig, train

    options = {k: v for k, v in vars(args).items() if k != "json"}
    config = TrainConfig(**options)
    with _ProgressBar() as bar:
        result = train(config, progress=bar.update)
    if args.json:
        print(json.dumps({"adapter_dir": str(result.adapter_dir), "steps": result.steps, "losses": result.losses,
                          "tokens_per_second": result.tokens_per_second, "seconds": result.seconds,
                          "metrics": result.metrics}))
        return EXIT_OK
    first, last = (result.losses[0], result.losses[-1]) if result.losses else (float("nan"), float("nan"))
    print(f"trained {result.steps} steps in {result.seconds:.0f} s ({result.tokens_per_second:.0f} tokens/s); "
          f"loss {first:.4f} -> {last:.4f}; adapter in {result.adapter_dir}")
    return EXIT_OK


class _ProgressBar:
    """A rich progress bar on stderr: steps, loss, tokens per second, time left."""

    def __enter__(self) -> _ProgressBar:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(TextColumn("train"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("loss {task.fields[loss]}  {task.fields[speed]} tok/s"),
                                 TimeRemainingColumn(), console=Console(stderr=True))
        self.progress.__enter__()
        self.task = self.progress.add_task("train", total=None, loss="-", speed="-")
        return self

    def update(self, report: Any) -> None:
        self.progress.update(self.task, completed=report.step, total=report.total, loss=f"{report.loss:.4f}",
                             speed=f"{report.tokens_per_second:.0f}")

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)


def _optional(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        return None if text.lower() == "none" else kind(text)

    parse.__name__ = kind.__name__
    return parse


# `eval` and `learn` add themselves here: name -> (add_arguments, run).
COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {
    "train": (add_train_arguments, train_main),
}
