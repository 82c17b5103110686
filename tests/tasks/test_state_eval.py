"""The statistics of a state replay and the gate that reads them, on labelled samples made by hand:
the interval is clustered by task, the same model twice gives an interval around zero that the gate
refuses, and a real drop with calls kept passes."""

from __future__ import annotations

from types import SimpleNamespace

from tasks.state_eval import MIN_CLUSTERS, _clusters, compare, compare_arms, detectable_change, gate, summarize
from tasks.states import Label

ERROR, OK, FINISH_EARLY = (
    Label("not_found", ("read_file",)),
    Label("ok", ("read_file",)),
    Label("premature_finish", ("finish",)),
)


def states(tasks: int, per_task: int = 3) -> list[SimpleNamespace]:
    return [SimpleNamespace(cluster=f"task{t}") for t in range(tasks) for _ in range(per_task)]


def labels(states_: list, error_every: int, samples: int = 4, offset: int = 0) -> list[list[Label]]:
    """Call errors in one sample of every `error_every` (varying by state, so tasks differ)."""
    return [
        [ERROR if (i * 7 + k + offset) % error_every == 0 else OK for k in range(samples)] for i in range(len(states_))
    ]


def doc(states_, before, after) -> dict:
    return {
        "states": len(states_),
        "clusters": len({s.cluster for s in states_}),
        "arms": {"before": summarize(before), "after": summarize(after)},
        "change": compare(states_, before, after, seed=0),
    }


def test_the_same_labels_twice_give_an_interval_around_zero_that_the_gate_refuses() -> None:
    found = states(8)
    before = labels(found, 2)
    result = doc(found, before, before)
    assert result["change"]["relative_change"] == 0.0
    low, high = result["change"]["interval"]
    assert low <= 0 <= high and result["change"]["verdict"] == "refuted"  # -30% is ruled out
    promoted, reason = gate(result)
    assert not promoted and "does not lie below zero" in reason


def test_a_real_drop_is_shown_and_passes_the_gate() -> None:
    found = states(10)
    before, after = labels(found, 2), labels(found, 6)
    result = doc(found, before, after)
    change = result["change"]
    assert change["relative_change"] < -0.3 and change["interval"][1] < 0 and change["verdict"] == "shown"
    promoted, reason = gate(result)
    assert promoted and "held-out states" in reason


def test_fewer_errors_by_calling_less_or_finishing_early_is_refused() -> None:
    found = states(10)
    before = labels(found, 2)
    silent = [[Label("answer") if label.call_error else label for label in row] for row in before]
    early = [[FINISH_EARLY if label.call_error else label for label in row] for row in before]
    assert "replies with a tool call moved" in gate(doc(found, before, silent))[1]
    assert "replies that call finish moved" in gate(doc(found, before, early))[1]


FINISHED = Label("finished", ("finish",))


def test_premature_finishes_that_replace_good_finishes_are_refused() -> None:
    """The finish share stays; what rises is finishing while the tests still fail."""
    found = states(10)
    before = [[FINISHED if k == 0 else label for k, label in enumerate(row)] for row in labels(found, 2)]
    after = [[FINISH_EARLY if label == FINISHED else label for label in row] for row in labels(found, 6)]
    after = [[FINISH_EARLY if k == 0 else label for k, label in enumerate(row)] for row in after]
    result = doc(found, before, after)
    assert abs(result["arms"]["after"]["finish_share"] - result["arms"]["before"]["finish_share"]) <= 0.05
    promoted, reason = gate(result)
    assert not promoted and "premature finishes rose" in reason


def test_a_shift_in_the_tool_mix_is_refused() -> None:
    found = states(10)
    before = labels(found, 2)
    listed = Label("ok", ("list_files",))
    after = [
        [listed if label == OK and i % 3 == 0 else label for label in row] for i, row in enumerate(labels(found, 6))
    ]
    promoted, reason = gate(doc(found, before, after))
    assert not promoted and "list_files's share of the calls moved from 0%" in reason


def with_checks(result: dict, probes: tuple[float, float], clean: tuple[float, float]) -> dict:
    return {
        **result,
        "no_tool": {"probes": 20, "before": {"success_rate": probes[0]}, "after": {"success_rate": probes[1]}},
        "clean_states": {"states": 12, "before": clean[0], "after": clean[1]},
    }


def test_an_adapter_that_calls_a_tool_where_none_is_needed_is_refused() -> None:
    """The adapter trained to always call a tool: its call errors at the task states fall with an
    interval below zero, but at the no-tool probes it calls read_file instead of answering."""
    found = states(10)
    result = doc(found, labels(found, 2), labels(found, 6))
    assert gate(with_checks(result, (0.9, 0.88), (0.8, 0.8)))[0]  # within bounds: promoted
    promoted, reason = gate(with_checks(result, (0.9, 0.1), (0.8, 0.8)))
    assert not promoted and "no-tool probes" in reason and "90% to 10%" in reason
    promoted, reason = gate(with_checks(result, (0.9, 0.9), (0.8, 0.7)))
    assert not promoted and "recorded call succeeded" in reason


def test_the_gate_reads_the_arm_it_is_asked_about() -> None:
    found = states(10)
    before = labels(found, 2)
    result = doc(found, before, before)
    result["arms"]["good"] = summarize(labels(found, 6))
    result["changes"] = {"after": result["change"], "good": compare(found, before, labels(found, 6), seed=0)}
    assert not gate(result)[0] and gate(result, after="good")[0]


def test_too_few_tasks_give_no_interval_and_no_promotion() -> None:
    found = states(MIN_CLUSTERS - 1, per_task=10)
    result = doc(found, labels(found, 2), labels(found, 8))
    assert result["change"]["interval"] is None and result["change"]["verdict"] is None
    assert "at least 5 tasks" in gate(result)[1]
    assert detectable_change(found, labels(found, 2), seed=0) is None


def varied(states_: list) -> list[list[Label]]:
    """Tasks of different difficulty: task t errs in (t mod 4) of each state's 4 samples."""
    return [[ERROR if k < int(s.cluster[4:]) % 4 else OK for k in range(4)] for s in states_]


def test_the_detectable_change_shrinks_with_more_tasks() -> None:
    few, many = states(8), states(80)
    small, large = detectable_change(few, varied(few), 0), detectable_change(many, varied(many), 0)
    assert small is not None and large is not None and small < large < 0  # more tasks see a smaller drop
    assert small < -0.3 < large  # 8 such tasks cannot show -30%; 80 can


def test_rates_by_kind_and_the_tool_mix() -> None:
    summary = summarize([[ERROR, OK], [FINISH_EARLY, Label("malformed_call", cut_off=True)]])
    assert summary["call_error_rate"] == 0.5 and summary["by_kind"] == {"malformed_call": 0.25, "not_found": 0.25}
    assert summary["cut_off_rate"] == 0.25
    assert summary["premature_finish_rate"] == 0.25 and summary["call_rate"] == 0.75
    assert summary["tool_mix"] == {"finish": 1 / 3, "read_file": 2 / 3}


def test_every_arm_is_compared_over_all_tasks_and_per_repository() -> None:
    found = [
        SimpleNamespace(cluster=f"{repo}.0123abcd.body__{repo}.f{t}")
        for repo in ("textkit", "inflection-0.5.1")
        for t in range(6)
    ]
    before, good = labels(found, 2, samples=4), labels(found, 6, samples=4)
    mixed = [
        row if state.cluster.startswith("textkit") else before[i] for i, (state, row) in enumerate(zip(found, good))
    ]
    cells = {arm: _clusters(found, rows) for arm, rows in (("before", before), ("good", good), ("mixed", mixed))}
    result = {
        "changes": {"good": compare(found, before, good, 0), "mixed": compare(found, before, mixed, 0)},
        "cells": cells,
    }
    arms = compare_arms(result)
    assert set(arms) == {"good", "mixed"}
    assert set(arms["mixed"]["by_repository"]) == {"textkit", "inflection-0.5.1"}
    assert arms["mixed"]["by_repository"]["inflection-0.5.1"]["relative_change"] == 0.0  # it learnt nothing there
    assert arms["mixed"]["by_repository"]["textkit"]["relative_change"] < -0.3
    assert arms["good"]["relative_change"] == result["changes"]["good"]["relative_change"]
