"""A dependency graph of pods held in arrays: CSR adjacency, strong components, Kahn levels.

The book's §3.1 keeps a PodGraph as value arrays of nodes and edges so that walking it never
chases pointers. The Python answer is the same idea with numpy: node i is row i, and the edges
"i must come before j" are stored once as CSR (compressed sparse rows):

    indptr[i] .. indptr[i+1]  is the slice of `indices` holding the successors of i

Two flat int arrays, whatever the number of edges, instead of a dict of sets per node (which is
what networkx keeps). scipy.sparse reads the same two arrays without copying them
(`as_csr()` shares their memory; `np.shares_memory` shows it), and its csgraph module finds the
strongly connected components in C.

Topological levels come from Kahn's algorithm run a whole frontier at a time: level 0 is every
node with no predecessor; removing a level lowers the in-degree of its successors (one bincount),
and the ones that reach zero are the next level. A node left over sits on a cycle or behind one;
`find_cycle()` names a cycle by walking inside one strong component.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

IndexArray = npt.NDArray[np.int64]

UNLEVELED = -1  # the level of a node that sits on a cycle or depends on one


class DependencyCycle(ValueError):
    """The graph has a cycle; `cycle` names it, first node repeated at the end."""

    def __init__(self, cycle: Sequence[str]) -> None:
        self.cycle = list(cycle)
        super().__init__("dependency cycle: " + " -> ".join(self.cycle) + " (each must come before the next)")


@dataclass(frozen=True, eq=False)
class PodGraph:
    """n nodes named `names`; edges i -> j ("i before j") as CSR (`indptr`, `indices`).

    Build it with `from_edges` (index arrays) or `from_dependencies` (name -> the names it
    depends on). The arrays are read-only: every view handed out can share them safely."""

    names: tuple[str, ...]
    indptr: IndexArray  # n + 1 offsets into indices
    indices: IndexArray  # successor of each edge, grouped by source

    def __post_init__(self) -> None:
        n = len(self.names)
        if self.indptr.shape != (n + 1,):
            raise ValueError(f"indptr must have {n + 1} entries for {n} nodes, got {self.indptr.shape}")
        if self.indptr[0] != 0 or self.indptr[-1] != len(self.indices):
            raise ValueError("indptr must start at 0 and end at the number of edges")
        if len(self.indices) and (self.indices.min() < 0 or self.indices.max() >= n):
            raise ValueError(f"edge endpoint out of range 0..{n - 1}")
        self.indptr.flags.writeable = False
        self.indices.flags.writeable = False

    # --- building --------------------------------------------------------------------------------

    @classmethod
    def from_edges(cls, n: int, src: npt.ArrayLike, dst: npt.ArrayLike,
                   names: Sequence[str] | None = None) -> PodGraph:
        """Edges src[k] -> dst[k] among nodes 0..n-1 (names default to their numbers)."""
        s = np.asarray(src, dtype=np.int64)
        d = np.asarray(dst, dtype=np.int64)
        if s.shape != d.shape or s.ndim != 1:
            raise ValueError(f"src and dst must be 1-d and the same length, got {s.shape} and {d.shape}")
        if len(s) and (min(s.min(), d.min()) < 0 or max(s.max(), d.max()) >= n):
            raise ValueError(f"edge endpoint out of range 0..{n - 1}")
        order = np.argsort(s, kind="stable")  # group edges by source: the CSR row order
        indices = d[order]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(s, minlength=n), out=indptr[1:])
        if names is None:
            names = [str(i) for i in range(n)]
        elif len(names) != n:
            raise ValueError(f"{len(names)} names for {n} nodes")
        return cls(tuple(names), indptr, indices)

    @classmethod
    def from_dependencies(cls, depends_on: Mapping[str, Iterable[str]]) -> PodGraph:
        """`depends_on[a]` are the names a must wait for (edges dep -> a). A dependency that is not
        itself a key becomes a node of its own (with no dependencies)."""
        index: dict[str, int] = {}
        for name in depends_on:
            index.setdefault(name, len(index))
        src: list[int] = []
        dst: list[int] = []
        for name, deps in depends_on.items():
            j = index[name]
            for dep in deps:
                src.append(index.setdefault(dep, len(index)))
                dst.append(j)
        return cls.from_edges(len(index), src, dst, names=list(index))

    # --- views ----------------------------------------------------------------------------------------

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def edge_count(self) -> int:
        return len(self.indices)

    def index_of(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(f"no node named {name!r}") from None

    def successors(self, i: int) -> IndexArray:
        """A view (no copy) of the successors of node i."""
        return self.indices[self.indptr[i]:self.indptr[i + 1]]

    def in_degree(self) -> IndexArray:
        return np.bincount(self.indices, minlength=self.n).astype(np.int64)

    def as_csr(self) -> Any:
        """scipy's csr_array over the same index arrays (only the unit data array is new)."""
        from scipy.sparse import csr_array

        data = np.ones(self.edge_count, dtype=np.int8)
        return csr_array((data, self.indices, self.indptr), shape=(self.n, self.n), copy=False)

    def nbytes(self) -> int:
        """Bytes held by the adjacency arrays (names not counted)."""
        return int(self.indptr.nbytes + self.indices.nbytes)

    # --- algorithms -------------------------------------------------------------------------------------

    def strong_components(self) -> tuple[int, IndexArray]:
        """(count, label per node): scipy.sparse.csgraph's strongly connected components."""
        from scipy.sparse.csgraph import connected_components

        count, labels = connected_components(self.as_csr(), directed=True, connection="strong")
        return int(count), np.asarray(labels, dtype=np.int64)

    def levels(self) -> IndexArray:
        """Kahn's algorithm a frontier at a time: level[i] is the length of the longest dependency
        chain ending at i (0: depends on nothing); UNLEVELED for nodes on or behind a cycle."""
        n = self.n
        level = np.full(n, UNLEVELED, dtype=np.int64)
        indeg = self.in_degree()
        frontier = np.flatnonzero(indeg == 0)
        depth = 0
        while frontier.size:
            level[frontier] = depth
            succ = self._gather(frontier)
            if succ.size:
                arrivals = np.bincount(succ, minlength=n)
                indeg -= arrivals
                touched = np.flatnonzero(arrivals)  # np.unique(succ), without importing numpy.ma
                frontier = touched[indeg[touched] == 0]
            else:
                frontier = succ
            depth += 1
        return level

    def _gather(self, rows: IndexArray) -> IndexArray:
        """The successors of all `rows`, concatenated (one fancy index, no Python loop)."""
        starts, ends = self.indptr[rows], self.indptr[rows + 1]
        counts = ends - starts
        total = int(counts.sum())
        if total == 0:
            return np.empty(0, dtype=np.int64)
        # positions: for each row, starts[r] .. ends[r]-1, laid end to end
        offsets = np.repeat(starts - np.cumsum(counts) + counts, counts)
        return self.indices[np.arange(total, dtype=np.int64) + offsets]

    def generations(self) -> list[list[str]]:
        """The names level by level (networkx's topological_generations); DependencyCycle if any
        node cannot be levelled."""
        level = self.levels()
        if (level == UNLEVELED).any():
            raise DependencyCycle(self.find_cycle() or [])
        order = np.argsort(level, kind="stable")
        bounds = np.searchsorted(level[order], np.arange(int(level.max(initial=-1)) + 2))
        return [[self.names[i] for i in order[bounds[k]:bounds[k + 1]]] for k in range(len(bounds) - 1)]

    def find_cycle(self, through: str | None = None) -> list[str] | None:
        """A cycle as names (first repeated at the end), None if there is none. With `through`,
        the shortest cycle containing that node. A node is on a cycle exactly when its strong
        component has more than one node, or it has an edge to itself."""
        count, labels = self.strong_components()
        sizes = np.bincount(labels, minlength=count)
        if through is not None:
            candidates = [self.index_of(through)]
        else:
            candidates = [int(i) for i in np.flatnonzero(sizes[labels] > 1)[:1]]
            if not candidates:  # only self-loops can be left
                src = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.indptr))
                candidates = [int(i) for i in src[src == self.indices][:1]]
        for start in candidates:
            if sizes[labels[start]] > 1 or start in self.successors(start):
                return self._cycle_via(start, int(labels[start]), labels)
        return None

    def _cycle_via(self, start: int, comp: int, labels: IndexArray) -> list[str]:
        """A shortest cycle through `start` inside its component (breadth-first back to start)."""
        parent = {start: -1}
        frontier = [start]
        while frontier:
            nxt_frontier = []
            for u in frontier:
                for v in map(int, self.successors(u)):
                    if labels[v] != comp:
                        continue
                    if v == start:
                        path = [u]
                        while parent[path[-1]] != -1:
                            path.append(parent[path[-1]])
                        return [self.names[i] for i in [*reversed(path), start]]
                    if v not in parent:
                        parent[v] = u
                        nxt_frontier.append(v)
            frontier = nxt_frontier
        raise AssertionError("a node of a strong component of size > 1 lies on a cycle")


def random_dag(n: int, edges_per_node: float, seed: int) -> PodGraph:
    """A seeded random DAG on n nodes: each edge goes from a lower to a higher index under a random
    relabelling, so it has no cycle and its levels are not just the index order."""
    rng = np.random.default_rng(seed)
    m = int(n * edges_per_node)
    a = rng.integers(0, n, size=m)
    b = rng.integers(0, n, size=m)
    keep = a != b
    lo, hi = np.minimum(a[keep], b[keep]), np.maximum(a[keep], b[keep])
    pairs = np.unique(lo * n + hi)  # drop duplicate edges
    perm = rng.permutation(n)
    return PodGraph.from_edges(n, perm[pairs // n], perm[pairs % n])
