"""State replay and branch sampling spread over an executor (tasks.executors: a local process pool or
a Ray cluster), one unit of work per session's states.

A unit samples its states with the same seeds as a run in one process and labels each sample on a
scratch copy of its own, so it depends on nothing but its states; the results come back in unit
order and are merged in state order. Labels, reproduction counts and branch records are therefore
the same whatever the executor, and the records are written (and redacted) in this process alone.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tasks.states import Label, Sampler, Scratch, State

Say = Callable[[str], None]


def session_groups(states: list[State]) -> list[list[int]]:
    """The states' indices, one list per session, sessions in the order their first state comes."""
    groups: dict[str, list[int]] = {}
    for index, state in enumerate(states):
        groups.setdefault(state.session_id, []).append(index)
    return list(groups.values())


# ---------------------------------------------------------------------------------------------
# `teachback eval --states`


@dataclass(frozen=True)
class ReplayUnit:
    config: Any  # tasks.state_eval.ReplayConfig
    arm: str
    sampler: Sampler
    states: list[State]
    tasks: dict[str, Any]
    reproduce: bool  # count whether the recorded seed draws the recorded reply again
    sample: Callable[..., Any]  # tasks.state_eval.sample_arm, handed in (a module-level function pickles by name)


def replay_unit(unit: ReplayUnit) -> tuple[list[list[Label]], Counter]:
    """One session's labels (tasks.state_eval.sample_arm) and its reproduction counts."""
    scratches = {id(s): Scratch(s, unit.tasks[s.task_id], unit.config.task_file) for s in unit.states}
    counts: Counter = Counter()
    try:
        labels = asyncio.run(
            unit.sample(
                unit.config,
                unit.arm,
                unit.sampler,
                unit.states,
                scratches,
                unit.tasks,
                lambda _: None,
                counts if unit.reproduce else None,
            )
        )
    finally:
        for scratch in scratches.values():
            scratch.close()
    return labels, counts


def replay_spread(
    config: Any,
    arm: str,
    sampler: Sampler,
    states: list[State],
    tasks: dict[str, Any],
    say: Say,
    reproduced: Counter | None,
    sample: Callable[..., Any],
) -> list[list[Label]]:
    """An arm's labels at every state, in state order, each session a unit on `config.executor`
    labelled by `sample` (tasks.state_eval.sample_arm); the sessions' reproduction counts added to
    `reproduced` in session order."""
    from tasks.executors import map_units

    groups = session_groups(states)
    units = [
        ReplayUnit(
            config,
            arm,
            sampler,
            picked := [states[i] for i in group],
            _tasks_of(picked, tasks),
            reproduced is not None,
            sample,
        )
        for group in groups
    ]
    labels: list[list[Label]] = [[] for _ in states]
    done = map_units(replay_unit, units, executor=config.executor, parallel=config.parallel, address=config.address)
    for number, (group, (found, counts)) in enumerate(zip(groups, done, strict=True), 1):
        for index, row in zip(group, found, strict=True):
            labels[index] = row
        if reproduced is not None:
            reproduced.update(counts)
        kinds = "; ".join(", ".join(label.kind for label in row) for row in found)
        say(f"{arm}: session {number}/{len(groups)} ({len(group)} states): {kinds}")
    return labels


def _tasks_of(states: list[State], tasks: dict[str, Any]) -> dict[str, Any]:
    return {s.task_id: tasks[s.task_id] for s in states}


# ---------------------------------------------------------------------------------------------
# `teachback tasks branch`


@dataclass(frozen=True)
class BranchUnit:
    config: Any  # tasks.branches.BranchConfig
    states: list[tuple[int, State]]  # with each state's number among all the run's states
    total: int
    tasks: dict[str, Any]
    branch: Callable[..., Any]  # tasks.branches.branch_one, handed in (it pickles by name)
    vocabulary: Callable[[str], Callable[[list[int]], str]]  # tasks.branches.vocabulary


def branch_unit(unit: BranchUnit) -> list[tuple[list[tuple[Any, list[Any]]], list[str]]]:
    """Each of one session's states' branches (tasks.branches.branch_one), in state order."""
    decode = unit.vocabulary(unit.config.model)

    async def every() -> list[tuple[list[tuple[Any, list[Any]]], list[str]]]:
        return [
            await unit.branch(
                unit.config, state, unit.tasks[state.task_id], decode, n == 0, f"state {number}/{unit.total}"
            )
            for n, (number, state) in enumerate(unit.states)
        ]

    return asyncio.run(every())


def branch_spread(
    config: Any,
    states: list[State],
    tasks: dict[str, Any],
    writer: Any,
    say: Say,
    branch: Callable[..., Any],
    vocabulary: Callable[[str], Callable[[list[int]], str]],
) -> None:
    """Every state's branches (`branch`: tasks.branches.branch_one), each session a unit on
    `config.executor`, written by `writer` (tasks.branches.RecordWriter) in state order as each
    session comes back."""
    from tasks.executors import map_units

    groups = session_groups(states)
    units = [
        BranchUnit(
            config,
            [(i + 1, states[i]) for i in group],
            len(states),
            _tasks_of([states[i] for i in group], tasks),
            branch,
            vocabulary,
        )
        for group in groups
    ]
    by_state: dict[int, tuple[list[tuple[Any, list[Any]]], list[str]]] = {}
    written = 0
    done = map_units(branch_unit, units, executor=config.executor, parallel=config.parallel, address=config.address)
    for group, found in zip(groups, done, strict=True):
        by_state.update(zip(group, found, strict=True))
        while written in by_state:  # sessions whose states interleave wait for the states before them
            drawn, lines = by_state.pop(written)
            for at, branches in drawn:
                writer.add(at, branches)
            for line in lines:
                say(line)
            written += 1
