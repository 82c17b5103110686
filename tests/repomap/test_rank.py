"""The ranking graph and personalised PageRank."""

from __future__ import annotations

import numpy as np

from agent.repomap.rank import Csr, FileParts, build_graph, pagerank, rank_definitions
from agent.repomap.tags import Tagger


def _parts(language: str, source: str) -> FileParts:
    return FileParts.of(Tagger().extract(language, source.encode()), language)


def test_names_link_only_within_a_language_family() -> None:
    graph = build_graph(
        {
            "user.py": _parts("python", "def main():\n    shared()\n    shared()\n    helper()\n"),
            "lib.c": _parts("c", "int shared(void) { return 0; }\n"),
            "tool.py": _parts("python", "def helper():\n    pass\n"),
            "app.ts": _parts("typescript", "import { render } from './ui';\nrender();\n"),
            "ui.js": _parts("javascript", "export function render() {}\n"),
        }
    )
    assert graph.idents == ("javascript:render", "python:helper")


def test_pagerank_matches_a_dense_reference() -> None:
    # 0 -> 1, 0 -> 2, 1 -> 2, 2 -> 0, 3 dangling
    rows, cols = np.array([1, 2, 2, 0]), np.array([0, 0, 1, 2])
    data = np.array([0.5, 0.5, 1.0, 1.0])
    personalization = np.full(4, 0.25)
    rank = pagerank(Csr.from_edges(rows, cols, data, 4), np.array([3]), personalization)
    dense = np.zeros((4, 4))
    dense[rows, cols] = data
    dense[:, 3] = personalization  # the dangling node teleports
    google = 0.85 * dense + 0.15 * np.outer(personalization, np.ones(4))
    values, vectors = np.linalg.eig(google)
    expected = np.real(vectors[:, np.argmax(np.real(values))])
    np.testing.assert_allclose(rank, expected / expected.sum(), atol=1e-9)
    assert abs(rank.sum() - 1.0) < 1e-9


def test_ties_are_broken_by_path_then_position() -> None:
    same = "def alpha():\n    pass\n\n\ndef beta():\n    pass\n"
    graph = build_graph({"b.py": _parts("python", same), "a.py": _parts("python", same)})
    assert list(rank_definitions(graph)) == [("a.py", 0), ("a.py", 1), ("b.py", 0), ("b.py", 1)]


def test_empty_graph() -> None:
    assert list(rank_definitions(build_graph({}))) == []
