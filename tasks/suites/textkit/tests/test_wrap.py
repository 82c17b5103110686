from textkit.wrap import truncate, wrap_words


def test_short_text_is_not_truncated():
    assert truncate("short", 10) == "short"


def test_long_text_ends_in_ellipsis():
    assert truncate("a long sentence", 8) == "a lon..."
    assert truncate("abcdef", 2) == ".."


def test_wrap_words():
    assert wrap_words("the quick brown fox jumps", 10) == ["the quick", "brown fox", "jumps"]
    assert wrap_words("", 5) == []
