"""Word statistics of a text."""

from collections import Counter


class WordStats:
    """Counts of the words of a text, case-insensitive."""

    def __init__(self, text):
        self.words = [word.strip(".,;:!?\"'()").lower() for word in text.split()]
        self.words = [word for word in self.words if word]
        self.counts = Counter(self.words)

    def unique_count(self):
        """How many different words the text has."""
        return len(self.counts)

    def most_common(self, n):
        """The `n` most frequent words as (word, count) pairs; ties in alphabetical order."""
        ranked = sorted(self.counts.items(), key=lambda item: (-item[1], item[0]))
        return ranked[:n]

    def average_length(self):
        """The mean length of the words, 0.0 for a text without words."""
        if not self.words:
            return 0.0
        return sum(len(word) for word in self.words) / len(self.words)
