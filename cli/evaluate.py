"""`teachback eval`: a trained adapter against the model without it, on held-out pairs and tasks,
or by state replay at recorded moments."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agent.config import REPLY_TOKENS
from cli.options import add_executor_options
from cli.train import EXIT_OK, EXIT_USAGE, add_held_out_arguments, database, needs_train_stack, say


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
        "--max-tokens",
        type=int,
        default=REPLY_TOKENS,
        metavar="N",
        help=f"tokens per sampled reply (default {REPLY_TOKENS})",
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
    add_executor_options(parser, "with --states, sessions sampled", parallel=False)
    parser.add_argument(
        "--against", type=Path, metavar="DIR", help="compare with this adapter instead of the base model"
    )
    parser.add_argument("--out", type=Path, metavar="FILE", help="the JSON file (default: DIR/eval.json)")
    add_held_out_arguments(parser)
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


@needs_train_stack
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
        db=database(args.db),
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
        doc = evaluate(config, progress=say)
    except (EvalError, AdapterError) as exc:
        print(f"teachback eval: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(json.dumps(doc, indent=2) if args.json else f"{render_table(doc)}\n\nJSON: {config.out}")
    return EXIT_OK


def _eval_states(args: argparse.Namespace) -> int:
    from tasks.executors import ExecutorError, sessions_on
    from tasks.records import TaskError
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
            **sessions_on(args.executor, args.parallel, args.address),
        )
        doc = run_replay(config, say=say)
    except (StateError, TaskError, ExecutorError) as exc:  # the database, the --tasks file, or Ray
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
