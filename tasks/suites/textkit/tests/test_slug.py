from textkit import slugify


def test_joins_words_with_hyphens():
    assert slugify("fast cars") == "fast-cars"


def test_lowercases():
    assert slugify("Hello World") == "hello-world"
