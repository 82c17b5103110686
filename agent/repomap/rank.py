"""Ranking definitions with personalised PageRank over a graph of files and identifiers.

The graph is bipartite: a file points at each identifier it references (weighted by how often,
and by what the name suggests), and an identifier points at the files that define it. Its size is
linear in the number of tags, unlike a file-to-file graph where one common name defined in n files
and used in m files costs n*m edges. Node order is sorted (files by path, identifiers by name) and
every reduction runs in a fixed order, so scores, and therefore the map, are identical across
processes and hash seeds.
"""

from __future__ import annotations

import io
import itertools
import json
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
# Languages whose files can use each other's definitions share a family.
LANGUAGE_FAMILY = {"typescript": "javascript", "tsx": "javascript", "cpp": "c"}
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
    idents: tuple[str, ...]  # "<family>:<name>", sorted; node len(files) + j is idents[j]
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

    def to_bytes(self) -> bytes:
        """The graph as .npy records (names as one JSON record first), for the cache: loading it
        costs a fraction of building it from every file's tags."""
        out = io.BytesIO()
        names = json.dumps([self.files, self.idents], ensure_ascii=False).encode("utf-8")
        np.save(out, np.frombuffer(names, dtype=np.uint8), allow_pickle=False)
        for array in self._arrays():
            np.save(out, array, allow_pickle=False)
        return out.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> Graph:
        """The graph `to_bytes` wrote; ValueError (or EOFError) if `data` is not one."""
        buffer = io.BytesIO(data)
        files, idents = json.loads(np.load(buffer, allow_pickle=False).tobytes().decode("utf-8"))
        arrays = [np.load(buffer, allow_pickle=False) for _ in range(len(_ARRAY_FIELDS) + 3)]
        fields = dict(zip(_ARRAY_FIELDS, arrays))
        return cls(tuple(files), tuple(idents), define_matrix=Csr(*arrays[-3:]), **fields)

    def _arrays(self) -> list[np.ndarray]:
        matrix = self.define_matrix
        return [getattr(self, name) for name in _ARRAY_FIELDS] + [matrix.indptr, matrix.indices, matrix.data]


_ARRAY_FIELDS = (
    "ident_weights",
    "edge_src",
    "edge_dst",
    "edge_refs",
    "def_file",
    "def_node",
    "def_entry",
    "def_share",
    "defs_per_file",
)


@dataclass(frozen=True, slots=True)
class FileParts:
    """One file's definitions and references as the graph consumes them (cached per file, so a
    rebuild after one file changed costs array work, not a Python loop over every tag).

    Names are qualified by language family: Python's `list(...)` is not a use of a C `struct
    list`, and TypeScript can use JavaScript's definitions.
    """

    def_entries: np.ndarray  # entry index of each definition
    def_names: tuple[str, ...]
    ref_names: tuple[str, ...]
    ref_counts: np.ndarray

    @classmethod
    def of(cls, tags: FileTags, language: str) -> FileParts:
        prefix = LANGUAGE_FAMILY.get(language, language) + ":"
        defs = [(index, entry.name) for index, entry in enumerate(tags.entries) if entry.name]
        return cls(
            np.array([index for index, _ in defs], dtype=np.int64),
            tuple(prefix + name for _, name in defs),
            tuple(prefix + name for name, _ in tags.refs),
            np.array([count for _, count in tags.refs], dtype=np.float64),
        )


def build_graph(parts: Mapping[str, FileParts]) -> Graph:
    files = tuple(sorted(parts))
    nfiles = len(files)
    ordered = [parts[path] for path in files]
    def_names = list(itertools.chain.from_iterable(p.def_names for p in ordered))
    ref_names = list(itertools.chain.from_iterable(p.ref_names for p in ordered))
    def_file = np.repeat(np.arange(nfiles), [len(p.def_names) for p in ordered])
    ref_file = np.repeat(np.arange(nfiles), [len(p.ref_names) for p in ordered])
    def_entry = np.concatenate([p.def_entries for p in ordered]) if ordered else np.zeros(0, np.int64)
    ref_counts = np.concatenate([p.ref_counts for p in ordered]) if ordered else np.zeros(0)

    idents = tuple(sorted(set(def_names).intersection(ref_names)))
    n = nfiles + len(idents)
    ident_node = dict(zip(idents, range(nfiles, n)))
    def_node = np.fromiter(map(ident_node.get, def_names, itertools.repeat(-1)), np.int64, len(def_names))
    ref_node = np.fromiter(map(ident_node.get, ref_names, itertools.repeat(-1)), np.int64, len(ref_names))

    # identifier -> defining file, weighted by that file's share of the identifier's definitions
    has_node = def_node >= 0
    pair_keys, pair_counts = np.unique(def_file[has_node] * n + def_node[has_node], return_counts=True)
    pair_file, pair_node = pair_keys // n, pair_keys % n
    totals = np.bincount(def_node[has_node] - nfiles, minlength=len(idents)).astype(np.float64)
    define_matrix = Csr.from_edges(pair_file, pair_node, pair_counts / totals[pair_node - nfiles], n)
    spread = np.bincount(pair_node - nfiles, minlength=len(idents))

    # file -> identifier, by reference count; a file's uses of its own names say little
    # about what matters to the others
    used = ref_node >= 0
    edge_src, edge_dst, edge_refs = ref_file[used], ref_node[used], ref_counts[used]
    own = np.isin(edge_src * n + edge_dst, pair_keys)
    edge_refs = np.where(own, edge_refs * SELF_REFERENCE, edge_refs)

    def_share = np.zeros(len(def_names))
    def_share[has_node] = 1.0 / totals[def_node[has_node] - nfiles]
    weights = np.array([_ident_weight(bare_name(ident), int(k)) for ident, k in zip(idents, spread)], dtype=np.float64)
    return Graph(
        files,
        idents,
        weights,
        edge_src,
        edge_dst,
        edge_refs,
        define_matrix,
        def_file,
        def_node,
        def_entry,
        def_share,
        np.bincount(def_file, minlength=nfiles).astype(np.float64),
    )


def bare_name(ident: str) -> str:
    """The identifier of a graph node, without its language family."""
    return ident.split(":", 1)[1]


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
    for j, ident in enumerate(graph.idents):
        if bare_name(ident) in mentioned_set:
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
