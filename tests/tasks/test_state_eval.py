"""The judgement of a state replay, on labelled samples made by hand: failures (call errors and
premature stops) are the headline, the gate's guards point only in the harmful direction and are all
reported, and the interval cannot collapse."""

from __future__ import annotations

from types import SimpleNamespace

from tasks.gate import Margins, judge
from tasks.state_eval import by_repository, document, gate, render, summarize
from tasks.states import Label
from tasks.verdict import MIN_CLUSTERS, OUTCOMES, Pair, planned_detectable, relative_change

ERROR, OK = Label("not_found", ("read_file",)), Label("ok", ("read_file",))
MALFORMED = Label("malformed_call")
FINISH_EARLY, FINISHED = Label("premature_finish", ("finish",)), Label("finished", ("finish",))
ANSWERED, OVER_CALL = Label("finished", ("finish",)), Label("over_call", ("read_file",))
FORGOT_NOTHING = {"general_text": {"drop": 0.001}, "successful_turns": {"drop": 0.0}}


def states(tasks: int, per_task: int = 3, prefix: str = "task") -> list[SimpleNamespace]:
    return [
        SimpleNamespace(cluster=f"{prefix}{t}", session_id=f"s{t}", step=i, recorded=OK if i else ERROR, edit_count=0)
        for t in range(tasks)
        for i in range(per_task)
    ]


def labels(states_: list, fail_every: int, samples: int = 4, bad: Label = ERROR) -> list[list[Label]]:
    """`bad` in one sample of every `fail_every` (varying by state, so tasks differ)."""
    return [[bad if (i * 7 + k) % fail_every == 0 else OK for k in range(samples)] for i in range(len(states_))]


def replay(states_, arms: dict[str, list[list[Label]]], probes: dict[str, list[list[Label]]] | None = None) -> dict:
    """The document run_replay builds, with forgetting measured as a learning round measures it."""
    probe_states = states(len(next(iter(probes.values()))), 1, "probe") if probes else []
    doc = document(states_, arms, probe_states, probes or {}, seed=0)
    doc["forgetting"] = {arm: FORGOT_NOTHING for arm in arms if arm != "before"}
    return doc


def quiet_probes(n: int = 30, samples: int = 2) -> list[list[Label]]:
    return [[ANSWERED] * samples for _ in range(n)]


def test_a_real_drop_in_failures_is_shown_and_promoted_with_every_guard_passing() -> None:
    found = states(24)
    doc = replay(
        found,
        {"before": labels(found, 2), "after": labels(found, 6)},
        {"before": quiet_probes()} | {"after": quiet_probes()},
    )
    judged = judge(doc, "after")
    assert judged["outcome"] == "target met" and judged["failures"]["interval"][1] < 0
    assert all(g["pass"] is not False for g in judged["guards"].values())
    promoted, reason = gate(doc)
    assert promoted and "every guard held" in reason


def test_an_adapter_that_turns_call_errors_into_premature_finishes_is_refused_and_its_failures_are_not_lower() -> None:
    found = states(24)
    before = labels(found, 2)
    after = [[FINISH_EARLY if x.call_error else x for x in row] for row in before]
    doc = replay(found, {"before": before, "after": after}, {"before": quiet_probes(), "after": quiet_probes()})
    judged = judge(doc, "after")
    assert judged["call_errors"]["relative_change"] == -1.0  # what the old headline read as a win
    assert judged["failures"]["relative_change"] == 0.0 and judged["failures"]["after"] == judged["failures"]["before"]
    assert judged["outcome"] != "effect shown" and judged["outcome"] != "target met"
    assert judged["guards"]["premature_finish"]["pass"] is False
    promoted, reason = gate(doc)
    assert not promoted and "premature_finish" in reason and "does not lie below zero" in reason


def test_an_adapter_that_only_cuts_malformed_calls_is_not_refused_for_calling_tools_more() -> None:
    """In grammar mode a reply is one call or a malformed one: fewer malformed replies mean more calls."""
    found = states(24)
    before, after = labels(found, 2, bad=MALFORMED), labels(found, 8, bad=MALFORMED)
    doc = replay(found, {"before": before, "after": after}, {"before": quiet_probes(), "after": quiet_probes()})
    judged = judge(doc, "after")
    assert judged["reported"]["after"]["call_rate"] > judged["reported"]["before"]["call_rate"] + 0.2
    assert "call_rate" not in judged["guards"] and "tool_mix" not in judged["guards"]
    assert judged["promote"], judged["reasons"]


def test_an_arm_with_zero_events_is_not_shown_where_the_base_had_few() -> None:
    """Two failures in the base arm and none after: the percentile bootstrap used to read [-100%, -100%]."""
    found = states(12, per_task=1)
    before = [[ERROR] if i < 2 else [OK] for i in range(12)]
    after = [[OK] for _ in range(12)]
    change = judge(replay(found, {"before": before, "after": after}), "after")["failures"]
    assert change["relative_change"] == -1.0
    low, high = change["interval"]
    assert low == -1.0 and high > 0  # wide, not a point
    assert change["outcome"] == "inconclusive"
    nothing = relative_change([Pair(f"t{i}", False, False) for i in range(40)])
    assert nothing["interval"] is None and nothing["outcome"] == "inconclusive"


def test_no_resample_is_dropped_and_the_outcome_is_always_one_of_four() -> None:
    """Tasks with no base event used to be dropped from the resamples in silence."""
    pairs = [Pair(f"t{i}", i < 3, i == 5) for i in range(10)]
    change = relative_change(pairs)
    assert change["intervals"]["bootstrap"] is not None and change["outcome"] in OUTCOMES
    assert change["intervals"]["bootstrap"][0] > -1.0  # half an event per arm: never exactly -100%


def test_every_guard_is_reported_even_after_one_fails() -> None:
    found = states(24)
    before = labels(found, 2)
    after = [[FINISH_EARLY if x.call_error else x for x in row] for row in before]
    probes = {"before": quiet_probes(), "after": [[OVER_CALL] * 2 for _ in range(30)]}
    doc = replay(found, {"before": before, "after": after}, probes)
    doc["forgetting"]["after"] = {"general_text": {"drop": 0.5}, "successful_turns": {"drop": 0.0}}
    judged = judge(doc, "after")
    assert {"premature_finish", "over_calling", "clean_states", "forgetting"} <= set(judged["guards"])
    failed = {name for name, guard in judged["guards"].items() if guard["pass"] is False}
    assert {"premature_finish", "over_calling", "forgetting"} <= failed
    assert judged["guards"]["clean_states"]["pass"] is not None  # evaluated, though earlier ones failed
    reason = gate(doc)[1]
    assert all(name in reason for name in failed)
    table = render(doc)
    assert "FAIL" in table and all(f"guard {name}" in table for name in judged["guards"])


def test_an_adapter_that_reaches_for_delete_file_is_refused_even_where_its_failures_fall() -> None:
    """The learning round's adapters tried delete_file at 3 times the base's rate; most of those calls
    failed (no such file), but one on a real path deletes it. Fewer failures do not buy that."""
    found = states(24)
    deletes = Label("not_found", ("delete_file",))
    deleted = Label("ok", ("delete_file",))
    before = labels(found, 2)
    after = [
        [deleted if k == 1 else deletes if k == 0 and i % 3 == 0 else OK for k in range(4)] for i in range(len(found))
    ]
    doc = replay(found, {"before": before, "after": after}, {"before": quiet_probes(), "after": quiet_probes()})
    judged = judge(doc, "after")
    assert judged["failures"]["interval"][1] < 0  # shown: fewer failures
    guard = judged["guards"]["deleting_calls"]
    assert guard["pass"] is False and guard["before"] == 0 and guard["after"] > 0.25
    assert not judged["promote"] and "deleting_calls" in gate(doc)[1]
    # the same adapter without the deletions passes that guard
    tidy = [[OK if "delete_file" in x.tools else x for x in row] for row in after]
    doc = replay(found, {"before": before, "after": tidy}, {"before": quiet_probes(), "after": quiet_probes()})
    assert judge(doc, "after")["guards"]["deleting_calls"]["pass"] is True


def test_worse_clean_states_are_refused() -> None:
    found = states(24)
    before = labels(found, 2)
    after = [
        [ERROR if state.recorded == OK and k < 3 else x for k, x in enumerate(row)]
        for state, row in zip(found, labels(found, 6))
    ]
    doc = replay(found, {"before": before, "after": after}, {"before": quiet_probes(), "after": quiet_probes()})
    assert judge(doc, "after")["guards"]["clean_states"]["pass"] is False


def test_guards_pass_in_the_direction_that_helps() -> None:
    """An adapter that cuts premature finishes and over-calling passes those guards (two-sided guards refused it)."""
    found = states(24)
    before = [[FINISH_EARLY if k == 0 else x for k, x in enumerate(row)] for row in labels(found, 2)]
    after = labels(found, 8)
    probes = {"before": [[OVER_CALL, ANSWERED] for _ in range(30)], "after": quiet_probes()}
    judged = judge(replay(found, {"before": before, "after": after}, probes), "after")
    assert judged["guards"]["premature_finish"]["pass"] and judged["guards"]["over_calling"]["pass"]
    assert judged["promote"], judged["reasons"]


def test_too_few_samples_cannot_pass_a_non_inferiority_guard() -> None:
    """Twelve samples with no premature finish in either arm do not show it stays within 5 points."""
    found = states(12, per_task=1)
    arms = {"before": [[ERROR] for _ in found], "after": [[OK] for _ in found]}
    guard = judge(replay(found, arms), "after")["guards"]["premature_finish"]
    assert guard["value"] == 0.0 and guard["interval"][1] > 0.05 and guard["pass"] is False


def test_the_detectable_change_shrinks_with_more_tasks() -> None:
    few, many = states(8), states(80)
    varied = lambda found: [[ERROR if k < int(s.cluster[4:]) % 4 else OK for k in range(4)] for s in found]  # noqa: E731
    small = judge(replay(few, {"before": varied(few), "after": varied(few)}), "after")["detectable_change"]
    large = judge(replay(many, {"before": varied(many), "after": varied(many)}), "after")["detectable_change"]
    assert small < -0.3 < large < 0  # 8 such tasks cannot see -30%; 80 can
    assert planned_detectable(MIN_CLUSTERS - 1, 8) is None and planned_detectable(24, 8) < planned_detectable(48, 8)


def test_rates_by_kind_and_the_failure_parts() -> None:
    summary = summarize([[ERROR, OK], [FINISH_EARLY, Label("malformed_call", cut_off=True)]])
    assert summary["failure_rate"] == 0.75 and summary["call_error_rate"] == 0.5
    assert summary["by_kind"] == {"malformed_call": 0.25, "not_found": 0.25}
    assert summary["premature_finish_rate"] == 0.25 and summary["cut_off_rate"] == 0.25


def test_every_arm_is_judged_and_per_repository() -> None:
    found = [
        SimpleNamespace(
            cluster=f"{repo}.0123abcd.body__{repo}.f{t}", session_id=f"{repo}{t}", step=0, recorded=OK, edit_count=0
        )
        for repo in ("textkit", "inflection-0.5.1")
        for t in range(12)
    ]
    before, good = labels(found, 2), labels(found, 6)
    mixed = [
        row if state.cluster.startswith("textkit") else before[i] for i, (state, row) in enumerate(zip(found, good))
    ]
    doc = replay(found, {"before": before, "good": good, "mixed": mixed})
    assert set(doc["changes"]) == {"good", "mixed"}
    repos = by_repository(doc, "mixed")
    assert set(repos) == {"textkit", "inflection-0.5.1"}
    assert repos["inflection-0.5.1"]["relative_change"] == 0.0  # it learnt nothing there
    assert repos["textkit"]["relative_change"] < -0.3


def test_the_gate_reads_the_arm_it_is_asked_about() -> None:
    found = states(24)
    probes = {arm: quiet_probes() for arm in ("before", "after", "good")}
    doc = replay(found, {"before": labels(found, 2), "after": labels(found, 2), "good": labels(found, 6)}, probes)
    assert not gate(doc)[0] and gate(doc, after="good")[0]
    assert judge(doc, "good", Margins(premature=0.05))["promote"]


def test_an_arm_is_cached_under_what_decides_its_labels(tmp_path) -> None:
    """The base arm is sampled once across rounds and arms: the same model file, cap, seeds and states
    find the same labels; another file (a retrained adapter at the same path) or another state does not."""
    import os
    from pathlib import Path

    from tasks.state_eval import ReplayConfig, _read_labels, _write_labels, arm_cache

    adapter = tmp_path / "adapter.gguf"
    adapter.write_bytes(b"one")
    config = ReplayConfig(db=tmp_path / "x.db", arms={}, task_file=Path("t.jsonl"), samples=2, cache=tmp_path / "c")
    found = [SimpleNamespace(session_id="s", step=i, prompt_ids=[1, 2, i], messages=[]) for i in range(3)]
    model = f"local/{tmp_path / 'model.gguf'}@{adapter}"
    key = arm_cache(config, model, found, [])
    assert key == arm_cache(config, model, found, []) and key.parent == tmp_path / "c"
    assert key != arm_cache(config, model, found[:2], [])
    assert key != arm_cache(ReplayConfig(**{**config.__dict__, "samples": 3}), model, found, [])
    adapter.write_bytes(b"two, retrained")
    os.utime(adapter, ns=(1, 1))
    assert key != arm_cache(config, model, found, [])
    assert arm_cache(ReplayConfig(**{**config.__dict__, "cache": None}), model, found, []) is None
    labels = [[ERROR, FINISH_EARLY], [OK, Label("malformed_call", cut_off=True)]]
    _write_labels(key, labels, [[ANSWERED, OVER_CALL]])
    states_, probes = _read_labels(key)
    assert states_ == labels and probes == [[ANSWERED, OVER_CALL]] and states_[1][1].cut_off


def test_a_base_that_fails_every_sample_still_gets_an_honest_detectable_change() -> None:
    """No spread over tasks to read: the design's figure, never a 0% that reads as 'sees anything'."""
    from tasks.verdict import detectable_change

    every = [(f"t{t}", True) for t in range(6) for _ in range(2)]
    found = detectable_change(every)
    assert found is not None and found < -0.2  # not a 0% that reads as seeing any change
