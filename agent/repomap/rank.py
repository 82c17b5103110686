"""Ranking definitions with personalised PageRank over a graph of files and identifiers.

The graph is bipartite: a file points at each identifier it references (weighted by how often,
and by what the name suggests), and an identifier points at the files that define it. Its size is
linear in the number of tags, unlike a file-to-file graph where one common name defined in n files
and used in m files costs n*m edges. Node order is sorted (files by path, identifiers by name) and
every reduction runs in a fixed order, so scores, and therefore the map, are identical across
processes and hash seeds.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from agent.repomap.tags import FileTags

DAMPING = 0.85
MAX_ITERATIONS = 100
TOLERANCE = 1e-10
FILE_RANK_SHARE = 0.25  # weight of a file's own rank in the score of each of its definitions
BOOST_SHARE = 0.8  # teleport mass that goes to boosted nodes when there are any
SELF_REFERENCE = 0.01  # reference count factor for a name the referencing file defines itself
_STRUCTURED = re.compile(r"_|[a-z][A-Z]")


@dataclass(frozen=True)
class Csr:
    """A sparse matrix in compressed sparse row form; rows are destination nodes."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray

    @classmethod
    def from_edges(cls, rows: np.ndarray, cols: np.ndarray, data: np.ndarray, n: int) -> Csr:
        order = np.lexsort((cols, rows))
        counts = np.bincount(rows, minlength=n)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return cls(indptr, cols[order], data[order])

    def matvec(self, x: np.ndarray) -> np.ndarray:
        products = self.data * x[self.indices]
        out = np.zeros(len(self.indptr) - 1)
        nonempty = self.indptr[:-1] < self.indptr[1:]
        if products.size:
            out[nonempty] = np.add.reduceat(products, self.indptr[:-1][nonempty])
        return out


def pagerank(matrix: Csr, dangling: np.ndarray, personalization: np.ndarray) -> np.ndarray:
    """Power iteration: `matrix` is column-stochastic except at `dangling` columns (no out-edges),
    whose mass is redistributed like the teleport, by `personalization` (sums to 1)."""
    rank = personalization.copy()
    for _ in range(MAX_ITERATIONS):
        spread = DAMPING * (matrix.matvec(rank) + rank[dangling].sum() * personalization)
        new = spread + (1.0 - DAMPING) * personalization
        delta = np.abs(new - rank).sum()
        rank = new
        if delta < TOLERANCE:
            break
    return rank


@dataclass(frozen=True)
class Graph:
    """Files, identifiers and definitions of one snapshot of the repository, ready to rank."""

    files: tuple[str, ...]  # sorted; node i is files[i]
    idents: tuple[str, ...]  # sorted; node len(files) + j is idents[j]
    ident_weights: np.ndarray  # multiplier per identifier from its shape and spread
    edge_src: np.ndarray  # file -> identifier edges (node ids), with their weighted reference counts
    edge_dst: np.ndarray
    edge_refs: np.ndarray
    define_matrix: Csr  # identifier -> defining file, already normalised
    def_file: np.ndarray  # per definition: file index, identifier node (or -1), entry index
    def_node: np.ndarray
    def_entry: np.ndarray
    def_share: np.ndarray  # fraction of its identifier's flow that reaches this definition
    defs_per_file: np.ndarray

    @property
    def size(self) -> int:
        return len(self.files) + len(self.idents)


def build_graph(tags: Mapping[str, FileTags]) -> Graph:
    files = tuple(sorted(tags))
    nfiles = len(files)
    defining: dict[str, list[int]] = {}  # name -> index of the defining file, once per definition
    definitions: list[tuple[int, int, str]] = []  # (file index, entry index, name)
    for index, path in enumerate(files):
        for entry_index, entry in enumerate(tags[path].entries):
            if entry.name:
                defining.setdefault(entry.name, []).append(index)
                definitions.append((index, entry_index, entry.name))
    referenced = {name for path in files for name, _ in tags[path].refs}
    idents = tuple(sorted(name for name in defining if name in referenced))
    ident_node = {name: nfiles + j for j, name in enumerate(idents)}

    defined_in = {name: set(defining[name]) for name in idents}
    src, dst, refs = [], [], []
    for index, path in enumerate(files):
        for name, count in tags[path].refs:
            node = ident_node.get(name)
            if node is not None:
                src.append(index)
                dst.append(node)
                # A file's uses of its own names say little about what matters to the others.
                refs.append(count * SELF_REFERENCE if index in defined_in[name] else count)

    def_rows, def_cols, def_data = [], [], []
    for name in idents:
        in_files = defining[name]
        for file_index in sorted(set(in_files)):
            def_rows.append(file_index)
            def_cols.append(ident_node[name])
            def_data.append(in_files.count(file_index) / len(in_files))
    n = nfiles + len(idents)
    define_matrix = Csr.from_edges(
        np.array(def_rows, dtype=np.int64), np.array(def_cols, dtype=np.int64),
        np.array(def_data, dtype=np.float64), n,
    )
    def_file = np.array([d[0] for d in definitions], dtype=np.int64)
    weights = np.array([_ident_weight(name, len(defined_in[name])) for name in idents], dtype=np.float64)
    return Graph(
        files, idents, weights,
        np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), np.array(refs, dtype=np.float64),
        define_matrix,
        def_file,
        np.array([ident_node.get(name, -1) for _, _, name in definitions], dtype=np.int64),
        np.array([d[1] for d in definitions], dtype=np.int64),
        np.array([1.0 / len(defining[name]) for _, _, name in definitions], dtype=np.float64),
        np.bincount(def_file, minlength=nfiles).astype(np.float64),
    )


def _ident_weight(name: str, defining_files: int) -> float:
    weight = 1.0
    if len(name) >= 8 and _STRUCTURED.search(name):
        weight *= 10.0  # a long, specific name says more than `get` or `run`
    if name.startswith("_"):
        weight *= 0.1
    if defining_files > 5:
        weight *= 0.1  # defined everywhere: says little about which file is meant
    return weight


def rank_definitions(
    graph: Graph,
    *,
    focus: Collection[str] = (),
    edited: Collection[str] = (),
    mentioned: Collection[str] = (),
) -> Iterator[tuple[str, int]]:
    """(path, entry index) of every definition, best first; ties broken by path, then position."""
    if not graph.files:
        return iter(())
    n = graph.size
    nfiles = len(graph.files)
    mentioned_set = set(mentioned)
    ident_weights = graph.ident_weights.copy()
    boost = np.zeros(n)
    for j, name in enumerate(graph.idents):
        if name in mentioned_set:
            ident_weights[j] *= 10.0
            boost[nfiles + j] = 1.0
    focus_set, edited_set = set(focus), set(edited)
    for i, path in enumerate(graph.files):
        stem = path.rsplit("/", 1)[-1].split(".", 1)[0]
        if path in focus_set or stem in mentioned_set:
            boost[i] += 1.0
        if path in edited_set:
            boost[i] += 0.5

    # file -> identifier edges, normalised per file
    weights = np.sqrt(graph.edge_refs) * ident_weights[graph.edge_dst - nfiles]
    out_weight = np.bincount(graph.edge_src, weights=weights, minlength=n)
    reference_matrix = Csr.from_edges(graph.edge_dst, graph.edge_src, weights / out_weight[graph.edge_src], n)
    matrix = _add(reference_matrix, graph.define_matrix, n)
    dangling = np.flatnonzero(np.bincount(matrix.indices, minlength=n) == 0)

    personalization = np.zeros(n)
    personalization[:nfiles] = 1.0 / nfiles
    boosted = BOOST_SHARE * boost / boost.sum() if boost.any() else boost
    personalization = (1.0 - boosted.sum()) * personalization + boosted
    rank = pagerank(matrix, dangling, personalization)

    has_node = graph.def_node >= 0
    flow = np.zeros(len(graph.def_node))
    flow[has_node] = rank[graph.def_node[has_node]] * graph.def_share[has_node]
    # A boosted file passes its rank on to what it uses; its own definitions keep the boost.
    file_weight = rank[:nfiles] + boosted[:nfiles]
    own = file_weight[graph.def_file] / graph.defs_per_file[graph.def_file]
    scores = flow + FILE_RANK_SHARE * own
    # A definition of a name the instruction mentions is what the user asked about.
    scores[has_node & (boost[graph.def_node] > 0)] *= 10.0
    # Files are numbered in path order, so sorting on (score, file, entry) breaks ties by path.
    order = np.lexsort((graph.def_entry, graph.def_file, -scores))
    return ((graph.files[graph.def_file[k]], int(graph.def_entry[k])) for k in order)


def _add(a: Csr, b: Csr, n: int) -> Csr:
    rows = np.concatenate([np.repeat(np.arange(n), np.diff(a.indptr)), np.repeat(np.arange(n), np.diff(b.indptr))])
    return Csr.from_edges(rows, np.concatenate([a.indices, b.indices]), np.concatenate([a.data, b.data]), n)

