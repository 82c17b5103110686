from textkit.case import camel_case, snake_case, split_words, title_case


def test_split_words_at_every_boundary():
    assert split_words("parseHTTP response_code-value") == ["parse", "HTTP", "response", "code", "value"]


def test_snake_case():
    assert snake_case("Hello World") == "hello_world"
    assert snake_case("alreadySnake") == "already_snake"


def test_camel_case():
    assert camel_case("hello big world") == "helloBigWorld"
    assert camel_case("") == ""


def test_title_case_keeps_small_words_low():
    assert title_case("the art of war") == "The Art of War"
