"""`teachback learn`: one round of the loop (sample or export, train, replay held-out states, promote
or keep), a rollback, or the rounds so far."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cli.options import add_executor_options
from cli.train import EXIT_OK, add_held_out_arguments, database, needs_train_stack, say


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
    add_held_out_arguments(parser)
    add_executor_options(parser, "held-out states", parallel=False)
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


@needs_train_stack
def learn_main(args: argparse.Namespace) -> int:
    from feedback_store.errors import StoreError
    from trainer import learn

    db = database(args.db)
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
                executor=args.executor,
                address=args.address,
                gate=learn.Gate(max_forgetting=args.max_forgetting),
                states=args.states,
                samples=args.samples,
                branches=args.branches,
                branch_samples=args.branch_samples,
                train_options={"steps": args.train_steps, "lr": args.lr},
            )
            outcome = learn.learn(config, say=say)
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
