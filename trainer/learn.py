"""`teachback learn`: one round of the online loop, and `teachback learn --rollback`.

Where the database holds task attempts of the embedded model (their states can be replayed), a
round is a branch round: at the states of the training side of the split (by task: attempts of one
task share their first prompt, so they never straddle it) the served model draws K replies each,
labelled by running them (tasks.branches); the objective's records (dpo, the default: same-state
success/failure with an NLL term on the chosen reply; sft: verified successes; sdpo: failures with a
same-state success as demonstration) train an adapter; the held-out tasks' states are replayed with
the served model and the adapter (tasks.state_eval), and forgetting is measured (trainer.evaluate).
Otherwise the round exports the feedback pairs recorded since the adapter served now was promoted
(split by task where sessions are task attempts, else by session) and trains on those. The adapter
is promoted only if its failures per sample (call errors and premature stops) fall with an interval
below zero and every guard of tasks.gate holds (premature finish, over-calling at no-tool probes,
clean states, forgetting). Every round and rollback is a row in the store (feedback_store.rounds).
Promoting writes the pointer file the embedded provider reads at every model call, so the language
server and the terminal app use the new adapter from their next model call on.

Safe from cron: one round at a time (a lock file; a second `learn` exits at once with EXIT_BUSY),
nothing is asked, and the exit code says what happened.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from feedback_store.rounds import LEARN, ROLLBACK, Round, record_round, rounds, served, served_stack
from feedback_store.store import Store, open_store
from tasks.gate import Margins

log = logging.getLogger(__name__)

# 0: an adapter was promoted (or the rollback was done); 1: the served model was kept (the gate
# refused the new adapter, or there were too few new pairs, or nothing to roll back); 2: it cannot
# run as asked; 3: another `teachback learn` is running; 4: the round failed midway (nothing changed).
EXIT_PROMOTED, EXIT_KEPT, EXIT_USAGE, EXIT_BUSY, EXIT_FAILED = 0, 1, 2, 3, 4
Say = Callable[[str], None]


class LearnError(Exception):
    """learn cannot run as asked; the message says how to fix it."""


class Busy(LearnError):
    """Another `teachback learn` holds the lock."""


@dataclass(frozen=True)
class Gate:
    max_forgetting: float = 0.02  # nats per token the log-likelihood may drop (general text, solved sessions' turns)
    min_call_ratio: float = 0.5  # tool calls per attempt, at least this share of the served model's (no states)
    margins: Margins = field(default_factory=Margins)  # the state replay's guards (tasks.gate)


@dataclass
class LearnConfig:
    db: Path
    tasks: Path | None = None  # held-out task file; None: the sample suite
    base: str | None = None  # None: the embedded model
    serve: str | None = None  # the GGUF model the adapter is served on; default: the base's own
    adapter: Path | None = None  # an adapter trained elsewhere (a GPU box): gate and promote it, no training
    objective: str | None = None  # None: by what the round trains on (objective_for)
    seed: int = 0
    test_fraction: float = 0.2
    min_pairs: int = 4  # train records needed to start a round
    attempts: int = 1
    max_steps: int | None = None  # agent steps per held-out attempt
    max_time: float | None = None
    parallel: int = 1
    executor: str = "local"  # where held-out states are replayed and branches sampled (tasks.executors)
    address: str | None = None  # the Ray cluster's; None: a local Ray started for the round
    gate: Gate = field(default_factory=Gate)
    states: Path | None = None  # held-out states to gate on; None: the test split of db's task attempts
    samples: int = 4  # replies per held-out state and side
    branches: bool = True  # train on replies sampled at the training states, where there are any
    branch_samples: int = 6  # replies per training state
    train_options: dict[str, Any] = field(default_factory=dict)  # more TrainConfig fields (steps, lr, ...)


@dataclass(frozen=True)
class Outcome:
    code: int
    message: str
    round: Round | None = None
    evaluation: dict[str, Any] | None = None


def adapters_dir() -> Path:
    from agent.config import teachback_home

    return teachback_home() / "adapters"


@contextlib.contextmanager
def learn_lock() -> Iterator[None]:
    """Held for a whole round or rollback; released by the system when the process ends, however
    it ends, so a killed round never blocks the next one."""
    path = adapters_dir() / "learn.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise Busy(f"another `teachback learn` is running ({holder}); this one did nothing.") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        handle.flush()
        yield


def learn(config: LearnConfig, say: Say | None = None) -> Outcome:
    say = say or (lambda text: log.info("%s", text))
    from trainer.gguf_lora import AdapterError, served_model

    try:
        gguf = served_model(config.serve, config.base)
    except AdapterError as exc:
        raise LearnError(str(exc)) from exc
    if gguf is None:
        raise LearnError(
            f"learn serves its adapters with llama.cpp, which needs a GGUF model; {config.base} is not "
            "one. Use the embedded model or a .gguf file, or name the GGUF with --serve."
        )
    with learn_lock(), open_store(config.db) as store:
        _close_interrupted(store)
        sync_pointer(store)
        parent = served(store)
        since = parent.started_at if parent else None
        entry = Round(
            action=LEARN, adapter_id=None, parent=parent.adapter_id if parent else None, since=since, base=str(gguf)
        )
        folder = adapters_dir() / entry.id
        sessions = _training_sessions(config) if config.adapter is None and config.branches else None
        if sessions:
            served_now = (
                "none" if parent is None or not parent.adapter_dir else str(Path(parent.adapter_dir) / "adapter.gguf")
            )
            split = _branch(config, sessions, f"local/{gguf}@{served_now}", folder, say)
        else:
            split = _export(config, since, folder) or {}
        found = _count(split["train"]) if "train" in split else 0
        if config.adapter is None and found < config.min_pairs:
            shutil.rmtree(folder, ignore_errors=True)
            what = (
                "training record(s) sampled at the training states"
                if sessions
                else "new training pair(s) since the last promotion"
            )
            return Outcome(
                EXIT_KEPT,
                f"{found} {what} (need {config.min_pairs}); "
                "nothing trained. Record more sessions, or lower --min-pairs.",
            )
        if config.adapter is not None:  # served from its own copy: later changes to the given folder do not leak in
            shutil.copytree(config.adapter, folder / "adapter", ignore=shutil.ignore_patterns("checkpoints"))
        entry = replace(
            entry,
            adapter_id=entry.id,
            adapter_dir=str(folder / "adapter"),
            records=found,
            data_hash=_hash(split["train"]) if "train" in split else None,
        )
        record_round(store, entry)
        try:
            return _round(config, store, entry, parent, split, folder, say)
        except Exception as exc:  # recorded with the round, reported by the exit code; nothing was promoted
            log.exception("learning round %s failed", entry.id)
            failed = replace(entry, reason=f"failed: {type(exc).__name__}: {exc}", finished_at=time.time())
            record_round(store, failed)
            return Outcome(EXIT_FAILED, f"round {entry.id} failed ({exc}); the served model is unchanged.", failed)


def _round(
    config: LearnConfig,
    store: Store,
    entry: Round,
    parent: Round | None,
    split: dict[str, Path],
    folder: Path,
    say: Say,
) -> Outcome:
    from trainer.evaluate import EvalConfig, evaluate
    from trainer.gguf_lora import ensure_served

    adapter = folder / "adapter"
    if config.adapter is None:
        say(f"round {entry.id}: training on {entry.records} pair(s) ({config.objective or 'default objective'})")
        adapter = _train(config, split["train"], adapter, say)
    ensure_served(adapter, Path(entry.base or ""))
    held = _held_out(config, say)
    say("evaluating against the served model")
    evaluation = evaluate(
        EvalConfig(
            adapter=adapter,
            out=folder / "eval.json",
            baseline=Path(parent.adapter_dir) if parent and parent.adapter_dir else None,
            base=config.base,
            serve=str(entry.base),
            pairs=[split["test"]] if split.get("test") else [],
            db=config.db,
            test_fraction=config.test_fraction,
            tasks=config.tasks,
            attempts=config.attempts,
            max_steps=config.max_steps,
            max_time=config.max_time,
            parallel=config.parallel,
            bench_cache=adapters_dir() / "bench-cache",
            seed=config.seed,
            behaviour=held is None,  # held-out states decide; the slow task runs only without them
            states_db=None if held is None else held[0],
            states_sessions=None if held is None else held[1],
            skip_tasks=lambda doc: forgot(doc, config.gate),
        ),
        say,
    )
    if held is not None and not forgot(evaluation, config.gate):
        replayed = _replay_states(config, held, parent, adapter / "adapter.gguf", Path(entry.base or ""), say)
        if replayed is not None:
            evaluation["states"] = replayed
            (folder / "eval.json").write_text(json.dumps(evaluation, indent=2, default=str), encoding="utf-8")
    promote, reason = decide(evaluation, config.gate)
    done = replace(
        entry,
        metrics=summary(evaluation, folder / "eval.json"),
        promoted=promote,
        reason=reason,
        finished_at=time.time(),
    )
    record_round(store, done)
    if promote:
        write_pointer(done)
        return Outcome(EXIT_PROMOTED, f"promoted {done.adapter_id}: {reason}", done, evaluation)
    return Outcome(EXIT_KEPT, f"kept {parent.adapter_id if parent else 'the base model'}: {reason}", done, evaluation)


def _held_out(config: LearnConfig, say: Say) -> tuple[Path, frozenset[str]] | None:
    """The held-out states' database and sessions: every session of `config.states`, or the test side
    of the database's own task attempts (split by task); None when there are none."""
    from tasks.states import StateError

    try:
        held_out = task_split(config.states, 1.0) if config.states else task_split(config.db, config.test_fraction)
    except StateError as exc:
        say(f"no held-out states: {exc}")
        return None
    if not held_out["test"]:
        say("no held-out states to replay: the held-out tasks decide")
        return None
    return config.states or config.db, held_out["test"]


def task_split(db: Path, test_fraction: float, replayable_only: bool = True) -> dict[str, frozenset[str]]:
    """The sessions of `db`'s task attempts (those whose states can be replayed, by default) on each
    side ("train", "test") of a split by task: every attempt of a task lands on the side its task id
    hashes to, so no held-out prompt is ever a training prompt (attempts of one task share their first
    prompt token for token)."""
    from feedback_store.export.export import split_of
    from tasks.states import load_states, replayable

    sides: dict[str, set[str]] = {"train": set(), "test": set()}
    for state in load_states(db):
        if replayable(state) or not replayable_only:
            sides[split_of(state.task_id, test_fraction)].add(state.session_id)
    return {side: frozenset(sessions) for side, sessions in sides.items()}


def _replay_states(
    config: LearnConfig, held: tuple[Path, frozenset[str]], parent: Round | None, served: Path, gguf: Path, say: Say
) -> dict | None:
    """The held-out states replayed with the served model and the new adapter (tasks.state_eval)."""
    from tasks.executors import ExecutorError, sessions_on
    from tasks.sample_suite import sample_suite_path
    from tasks.state_eval import ReplayConfig, run_replay
    from tasks.states import StateError

    source, sessions = held
    before = parent.adapter_dir if parent and parent.adapter_dir else "none"
    if before != "none":
        before = str(Path(before) / "adapter.gguf")
    replay = ReplayConfig(
        db=source,
        arms={"before": f"local/{gguf}@{before}", "after": f"local/{gguf}@{served}"},
        task_file=(config.tasks or sample_suite_path()).resolve(),
        samples=config.samples,
        sessions=sessions,
        seed=config.seed,
        **sessions_on(config.executor, config.parallel, config.address),
    )
    say(f"replaying {len(sessions)} held-out session(s) at their recorded states")
    try:
        return run_replay(replay, say)
    except StateError as exc:
        say(f"the held-out states could not be replayed: {exc}")
        return None
    except ExecutorError as exc:
        raise LearnError(str(exc)) from exc


def _training_sessions(config: LearnConfig) -> frozenset[str] | None:
    """The task sessions whose states train: the train side of the split by task (all of them when
    the held-out states come from another database)."""
    from tasks.states import StateError

    try:
        return task_split(config.db, 0.0 if config.states else config.test_fraction)["train"] or None
    except StateError:
        return None


def _branch(config: LearnConfig, sessions: frozenset[str], model: str, folder: Path, say: Say) -> dict[str, Path]:
    """The branch records at the training states; {"train": the objective's file}."""
    from tasks.branches import BranchConfig, render_summary, run_branches
    from tasks.executors import ExecutorError, sessions_on
    from tasks.sample_suite import sample_suite_path
    from tasks.states import StateError

    say(f"sampling {config.branch_samples} replies at each state of {len(sessions)} training session(s)")
    try:
        result = run_branches(
            BranchConfig(
                db=config.db,
                out=folder / "branches",
                task_file=(config.tasks or sample_suite_path()).resolve(),
                model=model,
                samples=config.branch_samples,
                sessions=sessions,
                hint_samples=config.branch_samples // 2,
                no_tool_samples=2,
                forward_samples=config.branch_samples // 2,
                **sessions_on(config.executor, config.parallel, config.address),
            ),
            say,
        )
    except (StateError, ExecutorError) as exc:
        raise LearnError(str(exc)) from exc
    say(render_summary(result))
    objective = objective_for(config, branch=True)
    return {"train": result.paths["sdpo" if objective == "mix" else objective]}


DEFAULT_OBJECTIVE = "dpo"  # on branch records; why, in the README's "Training on your feedback"


def objective_for(config: LearnConfig, branch: bool) -> str:
    """The round's objective: the one asked for, else DEFAULT_OBJECTIVE on branch records (dpo with an
    NLL term on the chosen reply: the fewest failures, premature finishes counted, of the measured arms)
    and sdpo on exported pairs (most carry no correction sft or dpo could learn)."""
    return config.objective or (DEFAULT_OBJECTIVE if branch else "sdpo")


def _train(config: LearnConfig, data: Path, out: Path, say: Say) -> Path:
    from trainer.train import BRANCH_ROUND, TrainConfig, train

    branch = _count_branch(data)
    options = {
        "data": [data],
        "out": out,
        "objective": objective_for(config, branch),
        "base": config.base,
        "seed": config.seed,
        **(BRANCH_ROUND if branch else {}),
        **{k: v for k, v in config.train_options.items() if v is not None},
    }
    result = train(TrainConfig(**options), progress=lambda r: say(f"step {r.step}/{r.total}: loss {r.loss:.4f}"))
    say(f"trained {result.steps} step(s) in {result.seconds:.0f} s ({result.tokens_per_second:.0f} tokens/s)")
    return Path(result.adapter_dir)


def decide(evaluation: dict[str, Any], gate: Gate) -> tuple[bool, str]:
    """Promote or not, and why, from an evaluation document: forgetting within bounds, and the
    held-out states' change in call errors with an interval below zero (tasks.state_eval.gate), or,
    where no states were replayed, the held-out tasks' interval below zero."""
    reason = forgot(evaluation, gate)
    if reason:
        return False, reason
    if evaluation.get("states"):
        from tasks.gate import gate as states_gate

        doc = {**evaluation["states"], "forgetting": {"after": evaluation.get("forgetting") or {}}}
        return states_gate(doc, "after", replace(gate.margins, forgetting=gate.max_forgetting))
    rates = (evaluation.get("behaviour") or {}).get("rates")
    if not rates:
        return False, "no held-out task results to judge by"
    errors, calls = rates["call_error_rate"], rates["calls_per_attempt"]
    if calls["before"] > 0 and calls["after"] < gate.min_call_ratio * calls["before"]:
        return False, (
            f"it makes far fewer tool calls ({calls['after']:.1f} per attempt against "
            f"{calls['before']:.1f}): fewer errors that way is not learning"
        )
    if not errors["after"] < errors["before"]:
        return False, f"the call-error rate did not drop ({errors['before']:.3f} → {errors['after']:.3f})"
    interval = errors.get("relative_ci")
    if interval is None or not interval[1] < 0:
        shown = "none" if interval is None else f"[{interval[0]:+.1%}, {interval[1]:+.1%}]"
        return False, (
            f"the call-error rate dropped ({errors['before']:.3f} → {errors['after']:.3f}), but its 95% interval "
            f"{shown} does not lie below zero: too few held-out tasks to tell it from chance"
        )
    return (
        True,
        f"call-error rate {errors['before']:.3f} → {errors['after']:.3f}, forgetting within {gate.max_forgetting:g}",
    )


def forgot(evaluation: dict[str, Any], gate: Gate) -> str | None:
    """Why the adapter forgot too much, or None."""
    forgetting = evaluation.get("forgetting") or {}
    for key, name in (("general_text", "general text"), ("successful_turns", "successful turns")):
        drop = (forgetting.get(key) or {}).get("drop")
        if drop is not None and drop > gate.max_forgetting:
            return (
                f"it forgot too much: log-likelihood on {name} fell {drop:.3f} nats/token "
                f"(allowed {gate.max_forgetting:g})"
            )
    return None


def summary(evaluation: dict[str, Any], path: Path) -> dict[str, Any]:
    """What a round row keeps of its evaluation (the whole document stays in `path`)."""
    return {
        "pairs": evaluation.get("pairs"),
        "forgetting": evaluation.get("forgetting"),
        "rates": (evaluation.get("behaviour") or {}).get("rates"),
        "states": (evaluation.get("states") or {}).get("change"),
        "shift": evaluation.get("shift"),
        "cpu_s": evaluation.get("cpu_s"),
        "eval": str(path),
    }


def rollback(db: Path) -> Outcome:
    """Serve the adapter that was served before the current one (or the base model)."""
    with learn_lock(), open_store(db) as store:
        stack = served_stack(rounds(store))
        if not stack:
            sync_pointer(store)
            return Outcome(EXIT_KEPT, "nothing to roll back: the base model is served.")
        current, previous = stack[-1], (stack[-2] if len(stack) > 1 else None)
        now = time.time()
        entry = Round(
            action=ROLLBACK,
            adapter_id=previous.adapter_id if previous else None,
            parent=current.adapter_id,
            adapter_dir=previous.adapter_dir if previous else None,
            base=current.base,
            promoted=True,
            reason=f"rolled back from {current.adapter_id}",
            started_at=now,
            finished_at=now,
        )
        record_round(store, entry)
        sync_pointer(store)
        return Outcome(
            EXIT_PROMOTED, f"now serving {entry.adapter_id or 'the base model'} (was {current.adapter_id}).", entry
        )


def _close_interrupted(store: Store) -> None:
    """Rounds left unfinished by a process that ended (the lock is held: no round is running)."""
    for entry in rounds(store):
        if entry.finished_at is None:
            record_round(
                store,
                replace(entry, reason="interrupted: the process ended before the round did", finished_at=time.time()),
            )


def sync_pointer(store: Store) -> None:
    """Make the pointer file say what the store says is served (a crash between the two writes, or
    another database used last, leaves them apart)."""
    write_pointer(served(store))


def write_pointer(entry: Round | None) -> None:
    from agent.providers.llama_engine import promoted_pointer
    from trainer.gguf_lora import ADAPTER_GGUF

    pointer = promoted_pointer()
    if entry is None or not entry.adapter_dir:
        pointer.unlink(missing_ok=True)
        return
    data = {
        "adapter_id": entry.adapter_id,
        "adapter_dir": entry.adapter_dir,
        "base": entry.base,
        "gguf": str(Path(entry.adapter_dir) / ADAPTER_GGUF),
        "round": entry.id,
    }
    pointer.parent.mkdir(parents=True, exist_ok=True)
    staging = pointer.with_name(f".{pointer.name}.{os.getpid()}")
    staging.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(staging, pointer)


def _export(config: LearnConfig, since: float | None, folder: Path) -> dict[str, Path] | None:
    from feedback_store.export.export import EmptyExport, export

    folder.mkdir(parents=True, exist_ok=True)
    try:
        result = export(
            [config.db],
            "sdpo",
            folder / "pairs.jsonl",
            since=since,
            test_fraction=config.test_fraction,
            command="teachback learn",
        )
    except EmptyExport:
        return None
    found = {p.name.rsplit(".", 2)[-2]: p for p in result.paths}  # pairs.train.jsonl -> train
    return found if "train" in found else None


def _count_branch(path: Path) -> bool:
    """The file holds branch records (not an sdpo export)."""
    from trainer.render import BRANCH_PREFIX

    with path.open(encoding="utf-8") as lines:
        first = next((line for line in lines if line.strip()), "{}")
    return str(json.loads(first).get("format", "")).startswith(BRANCH_PREFIX)


def _count(path: Path) -> int:
    with path.open(encoding="utf-8") as lines:
        return sum(1 for line in lines if line.strip())


def _hash(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
