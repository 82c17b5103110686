from textkit.stats import WordStats


def test_counts_are_case_insensitive():
    stats = WordStats("The cat and the hat.")
    assert stats.unique_count() == 4


def test_most_common_breaks_ties_alphabetically():
    stats = WordStats("b a b a c")
    assert stats.most_common(2) == [("a", 2), ("b", 2)]


def test_average_length():
    assert WordStats("ab abcd").average_length() == 3.0
    assert WordStats("").average_length() == 0.0
