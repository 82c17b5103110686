"""Where attempts run: a local process pool (the default) or a Ray cluster, and the results file;
`map_units` runs any other work (state replay, branch sampling) on the same choice.

Each finished attempt is appended to a JSONL file at once (flushed and synced), so a run that is
killed loses only the attempts in flight; started again with the same file it skips every attempt
already there (by instance id, attempt number and model) and runs the rest. An attempt whose record
carries `error` (the harness failed, not the agent) is run again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from agent.providers.llama_engine import usable_cpus
from tasks.rollout import AttemptSpec, run_attempt

log = logging.getLogger(__name__)

EXECUTORS = ("local", "ray")


class ExecutorError(Exception):
    """An executor that cannot run as asked; the message says how to fix it."""


class ResultsFile:
    """The JSONL file of attempt records; later lines win over earlier ones for the same attempt."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def records(self) -> dict[tuple[str, int, str], dict[str, Any]]:
        found: dict[tuple[str, int, str], dict[str, Any]] = {}
        if not self.path.exists():
            return found
        with self.path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                try:
                    record = json.loads(line)
                    found[(record["instance_id"], int(record["attempt"]), record["model"])] = record
                except (ValueError, KeyError, TypeError):  # a line cut short by a kill
                    log.warning("%s:%d is not a whole result record; its attempt will run again", self.path, number)
        return found

    def finished(self) -> set[tuple[str, int, str]]:
        """The attempts not to run again: those whose harness did not fail, recorded since call
        errors were counted apart from failing test runs (an older record runs again)."""
        return {key for key, record in self.records().items() if not record.get("error") and "call_errors" in record}

    def append(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a+b") as out:
            out.seek(0, os.SEEK_END)
            if out.tell():  # after a kill mid-line, start on a fresh line
                out.seek(-1, os.SEEK_END)
                if out.read(1) != b"\n":
                    out.write(b"\n")
            out.write(json.dumps(record, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n")
            out.flush()
            os.fsync(out.fileno())


def run_all(
    specs: list[AttemptSpec],
    results: ResultsFile,
    *,
    executor: str = "local",
    parallel: int = 1,
    address: str | None = None,
    on_result: Callable[[dict[str, Any], int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Run the attempts not yet in `results`, appending each record as it finishes; return the
    records of all `specs` (those from earlier runs included), in spec order."""
    finished = results.finished()
    todo = [spec for spec in specs if spec.key not in finished]
    if executor == "ray":  # each attempt reserves one CPU
        todo = [_with_threads(spec, 1) for spec in todo]
    elif parallel > 1:
        todo = [_with_threads(spec, max(1, usable_cpus() // parallel)) for spec in todo]
    if todo:
        stream = _ray_results(todo, address, parallel) if executor == "ray" else _local_results(todo, parallel)
        for count, record in enumerate(stream, 1):
            results.append(record)
            if on_result is not None:
                on_result(record, count, len(todo))
    recorded = results.records()
    return [recorded[spec.key] for spec in specs if spec.key in recorded]


def _with_threads(spec: AttemptSpec, threads: int) -> AttemptSpec:
    """The spec with the embedded model's thread count set, unless the spec already sets it: attempts
    running at once must share the CPUs (two models of two threads each on two cores run 3x slower
    than two of one thread each)."""
    if "local_threads" in spec.overrides:
        return spec
    return dataclasses.replace(spec, overrides={**spec.overrides, "local_threads": threads})


def _local_results(specs: list[AttemptSpec], parallel: int) -> Iterator[dict[str, Any]]:
    """In this process when `parallel` is 1; otherwise a pool of fresh (spawned) processes."""
    if parallel <= 1:
        yield from (run_attempt(spec) for spec in specs)
        return
    with ProcessPoolExecutor(max_workers=parallel, mp_context=get_context("spawn")) as pool:
        futures: dict[Future, AttemptSpec] = {pool.submit(run_attempt, spec): spec for spec in specs}
        try:
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield _outcome(future.result, futures[future])
            # All done: the workers are reaped now, so their CPU time is counted among this process's children.
            pool.shutdown(wait=True)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)  # stopped early: running attempts are not waited for


def _ray_results(specs: list[AttemptSpec], address: str | None, parallel: int) -> Iterator[dict[str, Any]]:
    """Attempts as Ray tasks (one CPU each), at most `parallel` in flight (0: as many as the cluster
    takes). Without `address` a local Ray instance is started for the run and stopped after it."""
    with ray_cluster(address) as ray:
        remote = ray.remote(num_cpus=1, max_retries=0)(run_attempt)
        waiting = iter(specs)
        in_flight: dict[Any, AttemptSpec] = {}
        limit = parallel if parallel > 0 else len(specs)
        _fill(in_flight, waiting, limit, remote)
        while in_flight:
            done, _ = ray.wait(list(in_flight), num_returns=1)
            spec = in_flight.pop(done[0])
            yield _outcome(functools.partial(ray.get, done[0]), spec)
            _fill(in_flight, waiting, limit, remote)


@contextlib.contextmanager
def ray_cluster(address: str | None) -> Iterator[Any]:
    """The `ray` module, connected to the cluster at `address`; without one (and no connection yet)
    a local Ray instance started here and stopped on leaving."""
    try:
        import ray
    except ImportError:
        raise ExecutorError(
            "The Ray executor needs Ray: pip install 'teachback[ray]' (or use --executor local)."
        ) from None
    started_here = not ray.is_initialized()
    if started_here:
        try:
            ray.init(
                address=address,
                runtime_env=_runtime_env(),
                include_dashboard=False,
                logging_level=logging.WARNING,
                log_to_driver=False,
            )
        except (ConnectionError, RuntimeError) as exc:
            raise ExecutorError(
                f"Cannot start or reach Ray{f' at {address}' if address else ''}: {str(exc).rstrip('.')}. Start a cluster with "
                "`ray start --head` (then --address auto), or leave out --address to start one for this run."
            ) from exc
    try:
        yield ray
    finally:
        if started_here:
            ray.shutdown()


def map_units(
    work: Callable[[Any], Any],
    units: list[Any],
    *,
    executor: str = "local",
    parallel: int = 1,
    address: str | None = None,
) -> Iterator[Any]:
    """`work(unit)` for every unit, yielded in unit order whatever order they finish in: in this
    process (local, `parallel` 1), a pool of `parallel` spawned processes (local), or one Ray task of
    one CPU each, at most `parallel` in flight (0: as many as the cluster takes). `work` must be a
    module-level function and a unit picklable; a unit that fails raises here."""
    if executor not in EXECUTORS:
        raise ExecutorError(f"executor {executor!r}: give one of {', '.join(EXECUTORS)}")
    if executor == "local" and parallel <= 1:
        yield from map(work, units)
    elif executor == "local":
        with ProcessPoolExecutor(max_workers=parallel, mp_context=get_context("spawn")) as pool:
            yield from pool.map(work, units)
    else:
        with ray_cluster(address) as ray:
            remote = ray.remote(num_cpus=1, max_retries=0)(work)
            limit = parallel if parallel > 0 else len(units)
            waiting, in_flight = iter(units), []
            in_flight += [remote.remote(unit) for unit in itertools.islice(waiting, limit)]
            while in_flight:
                result = ray.get(in_flight.pop(0))
                in_flight += [remote.remote(unit) for unit in itertools.islice(waiting, 1)]
                yield result


def sessions_on(executor: str, parallel: int, address: str | None) -> dict[str, Any]:
    """The executor fields of a state replay or branch sampling config (tasks.state_groups) for a
    command whose --parallel counts attempts: on Ray, that many sessions at once; locally, one
    session after another in this process, where the embedded model has every CPU."""
    return {"executor": executor, "parallel": parallel if executor == "ray" else 1, "address": address}


def _fill(in_flight: dict[Any, AttemptSpec], waiting: Iterator[AttemptSpec], limit: int, remote: Any) -> None:
    while len(in_flight) < limit:
        spec = next(waiting, None)
        if spec is None:
            return
        in_flight[remote.remote(spec)] = spec


def _outcome(get: Callable[[], dict[str, Any]], spec: AttemptSpec) -> dict[str, Any]:
    """The attempt's record, or an error record when its worker died (killed, out of memory)."""
    try:
        return get()
    except Exception as exc:  # the worker process is gone; the attempt runs again on resume
        log.warning("attempt %s #%d: worker failed: %s", spec.task.instance_id, spec.attempt, exc)
        return {
            "instance_id": spec.task.instance_id,
            "attempt": spec.attempt,
            "model": spec.model,
            "reward": 0.0,
            "error": f"worker failed: {type(exc).__name__}: {exc}",
        }


def _runtime_env() -> dict[str, Any]:
    """Ray workers see teachback's own settings and find its packages where this process does (a
    cluster of other machines needs teachback installed on each of them)."""
    import tasks

    source = str(Path(next(iter(tasks.__path__))).resolve().parent)
    paths = [source, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env = {name: value for name, value in os.environ.items() if name.startswith("TEACHBACK_")}
    return {"env_vars": {**env, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}}


def specs_for(tasks: Iterable[Any], attempts: int, **common: Any) -> list[AttemptSpec]:
    """Attempts 0..attempts-1 of every task, task by task."""
    return [AttemptSpec(task=task, attempt=n, **common) for task in tasks for n in range(attempts)]
