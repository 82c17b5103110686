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
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
TRAIN_STACK = ("torch", "transformers", "peft", "accelerate")
INSTALL_HINT = (
    "the trainer needs the `train` extra: install torch==2.13.0 (a CPU build: --index-url "
    "https://download.pytorch.org/whl/cpu), then pip install 'teachback[train]'"
)


def main(command: str, argv: list[str]) -> int:
    if command not in COMMANDS:
        print(
            f"teachback {command}: not in this version of the trainer (it has {', '.join(COMMANDS)}).", file=sys.stderr
        )
        return EXIT_USAGE
    add_arguments, run = COMMANDS[command]
    parser = argparse.ArgumentParser(prog=f"teachback {command}")
    add_arguments(parser)
    args = parser.parse_args(argv)
    missing = [name for name in TRAIN_STACK if importlib.util.find_spec(name) is None]
    if missing and not (command == "eval" and getattr(args, "states", None)):  # replay runs on llama.cpp
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


def train_main(args: argparse.Namespace) -> int:
    from trainer.train import TrainConfig, train

    options = {k: v for k, v in vars(args).items() if k != "json"}
    config = TrainConfig(**options)
    with _ProgressBar() as bar:
        result = train(config, progress=bar.update)
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


class _ProgressBar:
    """A rich progress bar on stderr: steps, loss, tokens per second, time left."""

    def __enter__(self) -> _ProgressBar:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(
            TextColumn("train"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}  {task.fields[speed]} tok/s"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self.progress.__enter__()
        self.task = self.progress.add_task("train", total=None, loss="-", speed="-")
        return self

    def update(self, report: Any) -> None:
        self.progress.update(
            self.task,
            completed=report.step,
            total=report.total,
            loss=f"{report.loss:.4f}",
            speed=f"{report.tokens_per_second:.0f}",
        )

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)


def _optional(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        return None if text.lower() == "none" else kind(text)

    parse.__name__ = kind.__name__
    return parse


# ---------------------------------------------------------------------------------------------
# teachback eval and teachback learn


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Evaluate a trained adapter against the model without it (or --against another adapter): "
        "held-out pairs, held-out tasks, forgetting. Prints one table; writes a JSON file."
    )
    parser.add_argument(
        "--adapter",
        type=Path,
        metavar="DIR",
        help="the adapter (teachback train --out, or a GGUF LoRA file); with --states, `none` samples the base alone",
    )
    parser.add_argument(
        "--states",
        type=Path,
        metavar="DB",
        help="state replay: sample --samples replies at every recorded model call of DB's task attempts, "
        "base and adapter with the same seeds, and compare their call errors",
    )
    parser.add_argument("--samples", type=int, default=4, metavar="K", help="replies per state and side (default 4)")
    parser.add_argument(
        "--max-tokens", type=int, default=256, metavar="N", help="tokens per sampled reply (default 256)"
    )
    parser.add_argument("--temperature", type=float, help="sampling temperature (default: each session's own)")
    parser.add_argument("--threads", type=int, help="the embedded model's threads (default: each session's own)")
    parser.add_argument(
        "--per-session", type=int, default=6, metavar="N", help="states per session at most (default 6)"
    )
    parser.add_argument(
        "--probes",
        type=int,
        metavar="N",
        help="with --states, no-tool probes per side at most, spread over the sessions (default: one per session)",
    )
    parser.add_argument(
        "--against", type=Path, metavar="DIR", help="compare with this adapter instead of the base model"
    )
    parser.add_argument("--out", type=Path, metavar="FILE", help="the JSON file (default: DIR/eval.json)")
    _shared_eval_arguments(parser)
    parser.add_argument(
        "--pairs",
        type=Path,
        nargs="+",
        default=[],
        metavar="FILE",
        help="held-out sdpo records (default: the database's test split)",
    )
    parser.add_argument("--no-tasks", dest="behaviour", action="store_false", help="skip the held-out task runs")
    parser.add_argument("--max-pairs", type=int, default=50, help="held-out pairs scored at most (default 50)")
    parser.add_argument("--max-turns", type=int, default=20, help="held-out successful turns scored at most")


def _shared_eval_arguments(parser: argparse.ArgumentParser) -> None:
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
    parser.add_argument("--parallel", type=int, default=1, help="attempts at once (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def eval_main(args: argparse.Namespace) -> int:
    if args.states is not None:
        return _eval_states(args)
    if args.adapter is None:
        print("teachback eval: give --adapter DIR (or --states DB to replay recorded states)", file=sys.stderr)
        return EXIT_USAGE
    from trainer.evaluate import EvalConfig, EvalError, evaluate, render_table
    from trainer.gguf_lora import AdapterError

    config = EvalConfig(
        adapter=args.adapter,
        out=args.out or args.adapter / "eval.json",
        baseline=args.against,
        base=args.base,
        serve=args.serve,
        pairs=args.pairs,
        db=_db(args.db),
        test_fraction=args.test_fraction,
        tasks=args.tasks,
        behaviour=args.behaviour,
        attempts=args.attempts,
        max_steps=args.max_steps,
        max_time=args.max_time,
        parallel=args.parallel,
        max_pairs=args.max_pairs,
        max_turns=args.max_turns,
        seed=args.seed,
    )
    try:
        doc = evaluate(config, progress=_say)
    except (EvalError, AdapterError) as exc:
        print(f"teachback eval: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(doc, indent=2) if args.json else f"{render_table(doc)}\n\nJSON: {config.out}")
    return EXIT_OK


def _eval_states(args: argparse.Namespace) -> int:
    from tasks.sample_suite import sample_suite_path
    from tasks.state_eval import ReplayConfig, render, run_replay
    from tasks.states import StateError

    try:
        arms = state_arms(args.adapter, args.against, args.serve or args.base)
        config = ReplayConfig(
            db=args.states,
            arms=arms,
            task_file=(args.tasks or sample_suite_path()).resolve(),
            samples=args.samples,
            cap=args.max_tokens,
            temperature=args.temperature,
            threads=args.threads,
            max_per_session=args.per_session,
            seed=args.seed,
            probes=args.probes,
        )
        doc = run_replay(config, say=_say)
    except StateError as exc:
        print(f"teachback eval: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.out is not None:
        args.out.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    print(json.dumps(doc, indent=2) if args.json else render(doc))
    return EXIT_OK


def state_arms(adapter: Path | None, against: Path | None, serve: str | None) -> dict[str, str]:
    """The model strings of the two sides: the base (or `against`) and the adapter, both served by
    llama.cpp on the same GGUF model. No adapter (or `none`): the base side alone."""
    from tasks.states import StateError

    model = (serve or "smollm2").removeprefix("local/")
    if not Path(model).suffix and model != "smollm2":  # before converting an adapter for it
        raise StateError(f"--serve {serve}: give smollm2 or a .gguf file")
    arms = {"before": f"local/{model}@{_served(against, model) if against else 'none'}"}
    if adapter is not None and str(adapter) != "none":
        arms["after"] = f"local/{model}@{_served(adapter, model)}"
    return arms


def _served(adapter: Path, model: str) -> Path:
    """The GGUF LoRA file llama.cpp serves for `adapter` (converted from a peft directory once)."""
    from tasks.states import StateError

    if adapter.suffix == ".gguf" and adapter.is_file():
        return adapter.resolve()
    if not adapter.is_dir():
        raise StateError(f"--adapter {adapter}: no such adapter directory or .gguf file")
    from agent.providers.llama_engine import model_path
    from trainer.gguf_lora import AdapterError, ensure_served

    try:
        return ensure_served(adapter, model_path(model)).resolve()
    except (AdapterError, ImportError) as exc:
        raise StateError(f"--adapter {adapter}: {exc}") from exc


def add_learn_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "One round of the loop: sample and label replies at the states of the database's task attempts "
        "(or, without any, export the pairs recorded since the served adapter was promoted), train, "
        "replay held-out states with the served model and the adapter, promote only if the call-error "
        "change's interval lies below zero, the tool mix, finish share and no-tool probes hold, and "
        "forgetting stays within --max-forgetting. Asks nothing; safe from cron. Exit codes: "
        "0 promoted (or rolled back), 1 kept the served model, 2 usage, 3 another learn is "
        "running, 4 the round failed."
    )
    parser.add_argument("--rollback", action="store_true", help="serve the adapter served before the current one")
    parser.add_argument("--history", action="store_true", help="list the rounds and rollbacks, newest last")
    parser.add_argument(
        "--adapter",
        type=Path,
        metavar="DIR",
        help="gate and promote an adapter trained elsewhere (e.g. on a GPU box) instead of training",
    )
    _shared_eval_arguments(parser)
    parser.add_argument(
        "--objective",
        choices=("sdpo", "sft", "dpo", "mix"),
        default=None,
        help="default: sft on branch records (the measured round's choice), sdpo on exported pairs",
    )
    parser.add_argument(
        "--train-steps",
        type=int,
        help="optimizer steps (default: 12 in a branch round, else one pass over the pairs)",
    )
    parser.add_argument("--lr", type=float, help="learning rate (default: 5e-4 in a branch round, else 1e-4)")
    parser.add_argument(
        "--branch-samples", type=int, default=6, metavar="K", help="replies sampled at each training state (default 6)"
    )
    parser.add_argument(
        "--no-branches",
        dest="branches",
        action="store_false",
        help="train on the exported feedback pairs even where the database's task attempts could be branched",
    )
    parser.add_argument("--min-pairs", type=int, default=4, help="new training pairs needed for a round (default 4)")
    parser.add_argument(
        "--states",
        type=Path,
        metavar="DB",
        help="held-out states to gate on (recorded task attempts the training never saw; default: the test "
        "split of --db's own task attempts)",
    )
    parser.add_argument("--samples", type=int, default=4, metavar="K", help="replies per held-out state and side")
    parser.add_argument(
        "--max-forgetting",
        type=float,
        default=0.05,
        metavar="NATS",
        help="largest drop in log-likelihood per token allowed (general text, successful turns)",
    )


def learn_main(args: argparse.Namespace) -> int:
    from feedback_store.errors import StoreError
    from trainer import learn

    db = _db(args.db)
    try:
        if args.history:
            return _history(db)
        if args.rollback:
            outcome = learn.rollback(db)
        else:
            config = learn.LearnConfig(
                db=db,
                tasks=args.tasks,
                base=args.base,
                serve=args.serve,
                adapter=args.adapter,
                objective=args.objective,
                seed=args.seed,
                test_fraction=args.test_fraction,
                min_pairs=args.min_pairs,
                attempts=args.attempts,
                max_steps=args.max_steps,
                max_time=args.max_time,
                parallel=args.parallel,
                gate=learn.Gate(max_forgetting=args.max_forgetting),
                states=args.states,
                samples=args.samples,
                branches=args.branches,
                branch_samples=args.branch_samples,
                train_options={"steps": args.train_steps, "lr": args.lr},
            )
            outcome = learn.learn(config, say=_say)
    except learn.Busy as exc:
        print(f"teachback learn: {exc}", file=sys.stderr)
        return learn.EXIT_BUSY
    except (learn.LearnError, StoreError) as exc:
        print(f"teachback learn: {exc}", file=sys.stderr)
        return learn.EXIT_USAGE
    if args.json:
        entry = outcome.round
        print(
            json.dumps(
                {"code": outcome.code, "message": outcome.message, "round": None if entry is None else entry.__dict__},
                default=str,
            )
        )
    else:
        print(outcome.message)
    return outcome.code


def _history(db: Path) -> int:
    from feedback_store.rounds import rounds
    from feedback_store.store import open_store

    with open_store(db) as store:
        entries = rounds(store)
    if not entries:
        print(f"no learning rounds in {db} yet: run `teachback learn`.")
    for entry in entries:
        rates = entry.metrics.get("rates") or {}
        rate = rates.get("call_error_rate") or rates.get("tool_error_rate") or {}  # rounds before call errors
        errors = f"call errors {rate['before']:.3f} -> {rate['after']:.3f}" if rate else ""
        state = "promoted" if entry.promoted else ("running" if entry.finished_at is None else "kept")
        print(
            f"{entry.id}  {entry.action:8}  {entry.adapter_id or 'base':18}  {state:8}  {entry.records:4} pairs  "
            f"{errors}  {entry.reason}"
        )
    return EXIT_OK


def _db(given: Path | None) -> Path:
    if given is not None:
        return given
    from agent.config import load_settings

    return load_settings(Path.cwd()).db_path()


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


COMMANDS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {
    "train": (add_train_arguments, train_main),
    "eval": (add_eval_arguments, eval_main),
    "learn": (add_learn_arguments, learn_main),
}
