"""No-tool probes: one per session from its first state, the instruction replaced by a question
that needs no tool, picked by the session id; a reply calling any tool but finish over-calls."""

from __future__ import annotations

from types import SimpleNamespace

from tasks.probes import OVER_CALL, TRAINING_QUESTIONS, build_probes, probe_label, questions
from tasks.states import State


def state(session: str, step: int, task: str = "do the task") -> State:
    messages = [
        {"role": "system", "content": "You are teachback."},
        {"role": "user", "content": task},
        {"role": "assistant", "content": '{"name": "read_file"}'},
    ][: 2 + (step > 0)]
    return State(session, step, "t1", messages, [], {}, {}, [1], [2], [], [], {}, [])


def reply(*tools: str, error: str | None = None) -> SimpleNamespace:
    calls = [{"function": {"name": tool, "arguments": "{}"}} for tool in tools]
    return SimpleNamespace(tool_calls=calls, format_error=error)


def test_one_probe_per_session_from_its_first_state_the_system_prompt_kept() -> None:
    found = [state("a", 0), state("a", 1), state("b", 0)]
    probes = build_probes(found)
    assert [p.session_id for p in probes] == ["a", "b"]
    for probe in probes:
        assert probe.messages[0] == {"role": "system", "content": "You are teachback."}
        assert len(probe.messages) == 2 and probe.messages[1]["role"] == "user"
        assert probe.messages[1]["content"] in questions() and probe.messages[1]["content"] != "do the task"
    again = build_probes(found)
    assert [p.messages for p in again] == [p.messages for p in probes]  # deterministic
    many = build_probes([state(f"s{i}", 0) for i in range(40)])
    assert len({p.messages[1]["content"] for p in many}) > 3  # sessions get different questions


def test_a_probe_reply_that_calls_a_tool_other_than_finish_over_calls() -> None:
    assert probe_label(reply("finish")).kind == "finished"
    assert probe_label(reply()).kind == "answer"
    assert probe_label(reply("read_file")).kind == OVER_CALL
    assert probe_label(reply("finish", "edit_file")).kind == OVER_CALL
    assert probe_label(reply(error="bad json")).call_error


def test_the_held_out_probes_are_enough_and_never_the_questions_training_may_use() -> None:
    held_out, training = questions(), questions(TRAINING_QUESTIONS)
    assert len(held_out) >= 24 and len(training) >= 10
    assert not set(held_out) & set(training)
    assert not {q.lower() for q in held_out} & {q.lower() for q in training}
