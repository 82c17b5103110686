from __future__ import annotations

from agent.repomap import identifiers_in


def test_code_shaped_words_are_kept_in_order() -> None:
    words = identifiers_in("Fix TaskStore.add so pending() skips done tasks; see load_store and MAX_SIZE.")
    assert words == ["TaskStore", "add", "pending", "skips", "tasks", "see", "load_store", "MAX_SIZE"]


def test_english_words_are_dropped_unless_written_as_code() -> None:
    assert identifiers_in("Please make it work with the new API") == ["work", "new", "API"]
    assert identifiers_in("call `use` then x.update()") == ["call", "use", "x", "update"]


def test_no_repeats() -> None:
    assert identifiers_in("greet greet Greet") == ["greet", "Greet"]
