"""Case conversion between the usual identifier styles."""

import re

_BOUNDARY = re.compile(r"[\s_\-]+|(?<=[a-z0-9])(?=[A-Z])")


def split_words(text):
    """The words of `text`, split at spaces, underscores, hyphens and lower-to-upper changes."""
    return [word for word in _BOUNDARY.split(text.strip()) if word]


def snake_case(text):
    """`text` as lowercase words joined by underscores: "Hello World" -> "hello_world"."""
    return "_".join(word.lower() for word in split_words(text))


def camel_case(text):
    """`text` in camelCase: "hello world" -> "helloWorld"."""
    words = split_words(text)
    if not words:
        return ""
    return words[0].lower() + "".join(word.capitalize() for word in words[1:])


def title_case(text, small_words=("a", "an", "and", "of", "the", "to")):
    """Each word capitalized, except `small_words` that are not first: "the art of war" ->
    "The Art of War"."""
    words = text.split()
    result = []
    for index, word in enumerate(words):
        if index > 0 and word.lower() in small_words:
            result.append(word.lower())
        else:
            result.append(word.capitalize())
    return " ".join(result)
