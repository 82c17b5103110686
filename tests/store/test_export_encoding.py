"""A record's JSON line is spliced from pieces encoded once (export.encoding, common.jsontext) and
is the very text json.dumps writes."""

from __future__ import annotations

import json

import pytest

from common.jsontext import dumps_with
from feedback_store.export.encoding import record_line
from feedback_store.export.views import Memo

VALUES = [
    1.5,
    float("nan"),
    -0.0,
    10**30,
    'é \u2028 " \\ \ud800 \n',
    {"b": [1, None, True], "a": {"z": 1, "y": "ünï"}},
    [],
    {},
    {1: "int key", "x": 2.25},
]


@pytest.mark.parametrize(
    "options",
    [{}, {"ensure_ascii": False}, {"ensure_ascii": False, "separators": (",", ":")}],
    ids=["default", "unicode", "compact"],
)
def test_dumps_with_writes_what_json_dumps_writes(options: dict) -> None:
    dumps = dumps_with(**options)
    for value in VALUES:
        assert dumps(value) == json.dumps(value, **options)


def test_sorted_keys_as_json_dumps_sorts_them() -> None:
    dumps = dumps_with(ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    value = {"b": {"y": 1, "x": [2, {"d": 3, "c": 4}]}, "a": "é"}
    assert dumps(value) == json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def test_a_value_json_cannot_write_fails_as_json_dumps_fails() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps_with(ensure_ascii=False)({"a": object()})


def test_records_sharing_messages_are_written_as_json_dumps_writes_them() -> None:
    system = {"role": "system", "content": "Be careful. ünï"}
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": {"arguments": {"a": 1}}}]}
    tools = [{"type": "function", "function": {"name": "edit_file"}}]
    memo = Memo()
    records = [
        {
            "format": "teachback-sdpo-3",
            "id": f"p{n}",
            "created_at": 1796423550.6781816 + n,
            "prompt": [system, call][: n + 1],
            "tools": tools,
            "completion": call,
            "feedback": "old_text was not found",
            "correction": None,
            "empty": [],
            "mixed": [system, "text"],
            "teacher_prompt": [system, call, {"role": "user", "content": f"hindsight {n}"}],
            "rendered": None,
            3: "a key json.dumps writes as text",
        }
        for n in range(2)
    ]
    for record in records:
        assert record_line(record, memo) == json.dumps(record, ensure_ascii=False)
    assert memo.has(system) and memo.has(call)  # encoded once, spliced into both records


def test_a_changed_copy_is_not_taken_for_the_object_encoded_before() -> None:
    memo = Memo()
    message = {"role": "user", "content": "first"}
    assert record_line({"prompt": [message]}, memo) == '{"prompt": [{"role": "user", "content": "first"}]}'
    other = {**message, "content": "second"}
    assert record_line({"prompt": [other]}, memo) == '{"prompt": [{"role": "user", "content": "second"}]}'


def test_memo_each_gives_each_items_result_however_the_lists_differ() -> None:
    made: list[str] = []

    def make(message: dict) -> str:
        made.append(message["content"])
        return message["content"].upper()

    a, b, c, d = ({"content": x} for x in "abcd")
    memo = Memo()
    assert memo.each([a, b], make, "prompt") == ["A", "B"]
    assert memo.each([a, b, c], make, "prompt") == ["A", "B", "C"]  # extends the one before
    assert memo.each([a, d, c], make, "prompt") == ["A", "D", "C"]  # differs in the middle
    assert memo.each([c], make, "tools") == ["C"]  # another kind of list keeps its own prefix
    assert memo.each([a, d], make, "prompt") == ["A", "D"]
    assert made == ["a", "b", "c", "d"]  # each object made once
    copy = {"content": "a"}
    assert memo.each([copy, d], make, "prompt") == ["A", "D"] and made[-1] == "a"  # an equal copy is another object


def test_a_memo_with_a_limit_forgets_and_still_answers() -> None:
    memo = Memo(limit=3)
    messages = [{"content": str(n)} for n in range(10)]
    for message in messages:
        assert memo.get(message, lambda m: m["content"]) == message["content"]
    assert len(memo.items) <= 3
    assert memo.each(messages, lambda m: m["content"] * 2, "prompt")[-1] == "99"  # forgotten: made again
    assert len(memo.items) <= 3


def test_memo_each_finds_the_common_prefix_of_any_two_lists() -> None:
    objs = [{"n": n} for n in range(9)]
    memo = Memo()
    for first in ([], objs[:1], objs[:5], objs):
        for second in ([], objs[:1], objs[:4], objs[:5], objs, [*objs[:3], {"n": 3}], objs[::-1], [objs[2]]):
            memo.each(first, lambda o: o["n"], "k")
            assert memo.each(second, lambda o: o["n"], "k") == [o["n"] for o in second]
            seen, seen_ids, results = memo.prefixes["k"]
            assert seen == second and seen_ids == [id(o) for o in second] and len(results) == len(second)
