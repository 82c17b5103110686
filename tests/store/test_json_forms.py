"""The JSON forms the store writes (feedback_store.content.hashing) are exactly json.dumps' text with their
options: stored rows, blob hashes and exports depend on every byte."""

from __future__ import annotations

import json
import math

import pytest

from feedback_store.content.hashing import canonical_json, message_json, ordered_json, row_json

VALUES = [
    {"b": 1, "a": [1.5, -0.0, 1e300, 10**30, True, None], "c": {"z": 'ü\n"\\', "y": "\ud800"}},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {"arguments": '{"x": 1}'}}]},
    {3: "int key", 2.5: "float key"},
    {False: "bool key"},
    {None: "none key"},
    {"nan": math.nan, "inf": math.inf, "-inf": -math.inf},
    [],
    {},
    "just text \u2028 with a line separator",
    3,
    None,
]
FORMS = [
    (ordered_json, {"separators": (",", ":")}),
    (canonical_json, {"sort_keys": True, "separators": (",", ":")}),
    (row_json, {"sort_keys": True}),
    (message_json, {}),
]


@pytest.mark.parametrize(("form", "options"), FORMS)
def test_each_form_is_json_dumps_with_its_options(form, options) -> None:
    for value in VALUES:
        assert form(value) == json.dumps(value, ensure_ascii=False, **options)


@pytest.mark.parametrize(("form", "options"), FORMS)
def test_a_value_with_no_json_form_fails_and_the_next_is_encoded_as_usual(form, options) -> None:
    with pytest.raises(TypeError):
        form({"a": [{"b": {1, 2}}]})
    assert form({"a": [{"b": [1, 2]}]}) == json.dumps({"a": [{"b": [1, 2]}]}, ensure_ascii=False, **options)
