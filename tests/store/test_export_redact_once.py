"""The export redacts each distinct text once (export_io.OncePerText) and still counts every secret
as a redactor that read each text anew would."""

from __future__ import annotations

import json
from typing import Any

from feedback_store.export.export_io import OncePerText
from feedback_store.redaction.redactor import Redactor

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
KEY = "AKIA" + "QWERTYUIOPASDFGH"


class Counting(Redactor):
    """A Redactor that says how many texts it read."""

    def __init__(self) -> None:
        super().__init__(env={})
        self.reads = 0

    def find(self, text: str) -> list:
        self.reads += 1
        return super().find(text)


def calls() -> list[tuple[str, Any]]:
    shared = {"role": "system", "content": f"Deploy with {TOKEN} and {KEY}."}
    clean = {"role": "user", "content": "Fix the greeting."}
    return [
        ("value", shared),
        ("value", dict(shared)),  # an equal message from another session: its JSON text is known
        ("value", clean),
        ("value", dict(clean)),
        ("text", f"the key is {KEY}"),
        ("text", f"the key is {KEY}"),
        ("text", "nothing secret here"),
        ("value", [shared, clean]),
    ]


def run(redactor: Any) -> list[Any]:
    return [redactor.redact(v) if how == "text" else redactor.redact_value(v) for how, v in calls()]


def test_each_distinct_text_is_read_once_and_counted_every_time() -> None:
    plain, counting = Redactor(env={}), Counting()
    once = OncePerText(counting)
    expected, got = run(plain), run(once)
    assert got == expected
    assert counting.counts == plain.counts and sum(plain.counts.values()) == 2 * 2 + 2 + 2
    assert counting.reads == 5  # the shared message, the clean one, two texts, the list
    assert TOKEN not in json.dumps(got)


def test_a_text_with_no_secret_comes_back_as_the_callers_own_object() -> None:
    once = OncePerText(Redactor(env={}))
    first, second = {"role": "user", "content": "hi"}, {"role": "user", "content": "hi"}
    assert once.redact_value(first) is first
    assert once.redact_value(second) is second


def test_the_memory_is_bounded() -> None:
    counting = Counting()
    once = OncePerText(counting)
    once.MEMO_CHARS = 100
    for n in range(20):
        once.redact(f"text number {n} " * 3)
    assert once.chars <= 100 and len(once.texts) < 20
    once.redact("text number 19 " * 3)  # the latest is still known
    assert counting.reads == 20
