"""Fitting text into a width."""


def truncate(text, width, ellipsis="..."):
    """`text` cut to at most `width` characters, ending in `ellipsis` when it was cut."""
    if len(text) <= width:
        return text
    if width <= len(ellipsis):
        return ellipsis[:width]
    return text[: width - len(ellipsis)] + ellipsis


def wrap_words(text, width):
    """The words of `text` as lines of at most `width` characters (a longer word gets a line of
    its own)."""
    lines = []
    current = ""
    for word in text.split():
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    if current:
        lines.append(current)
    return lines
