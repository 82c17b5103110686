def word_count(text):
    """Number of words in `text`, split on whitespace."""
    return len(text.split())
