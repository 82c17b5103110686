"""The embedded model's loop detector, and how much of a streaming text-mode reply is prose."""

from __future__ import annotations

import random

from agent.protocol.textcalls import prose_length
from agent.providers.early_stops import LOOP_SPAN, RepetitionGuard


def first_loop(tokens: list[int]) -> int | None:
    """The number of tokens taken when the guard first says the reply loops."""
    guard = RepetitionGuard()
    return next((n for n, token in enumerate(tokens, 1) if guard.add(token)), None)


def test_a_sentence_repeated_is_a_loop_once_its_repeats_cover_the_span() -> None:
    sentence = [791, 3884, 574, 8308, 7946, 13, 220]  # 7 tokens, as "The task was completed successfully. "
    stopped = first_loop(sentence * 40)
    assert stopped is not None
    assert stopped == 5 * len(sentence) - 3  # LOOP_SPAN (32) tokens of one 7-token unit
    assert stopped >= LOOP_SPAN


def test_one_token_repeated_is_a_loop_at_the_span() -> None:
    assert first_loop([5] * 100) == LOOP_SPAN


def test_a_long_line_repeated_four_times_is_a_loop() -> None:
    line = list(range(100, 150))  # 50 tokens
    assert first_loop(line * 5) == 4 * len(line)


def test_varied_text_and_three_repeats_are_not_loops() -> None:
    rng = random.Random(0)
    assert first_loop([rng.randrange(50_000) for _ in range(2000)]) is None
    assert first_loop(list(range(200, 220)) * 3 + list(range(300, 400))) is None  # a 20-token line 3 times


def test_a_unit_longer_than_the_watched_period_is_not_seen() -> None:
    assert first_loop(list(range(1000, 1080)) * 4) is None  # 80 > 64 tokens: left to the token cap


def test_prose_streams_up_to_where_a_call_may_begin() -> None:
    assert prose_length("I will read it.") == len("I will read it.")
    text = 'Reading.\n<tool_call>\n{"name": "read_file"'
    assert prose_length(text) == len("Reading.\n")
    assert prose_length('Reading.\n{"name": "read_file"}') == len("Reading.\n")
    assert prose_length("Here:\n```json\n{}") == len("Here:\n")
    assert prose_length('{"name": "finish", "arguments": {}}') == 0  # the grammar mode's whole reply


def test_an_end_that_may_grow_into_a_call_is_held_back() -> None:
    assert prose_length("Reading <tool") == len("Reading ")
    assert prose_length("See `") == len("See ")
    assert prose_length("Done.\n  ") == len("Done.\n")
    assert prose_length("a <b> c") == len("a <b> c")  # not a call tag once it has closed
