"""The same levels from networkx and graphlib, and a measurement of the three (for §3.1)."""

from __future__ import annotations

import gc
import graphlib
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from minisched.graph.podgraph import PodGraph


def edge_lists(g: PodGraph) -> tuple[list[int], list[int]]:
    """(sources, targets) as Python ints, what networkx and graphlib take."""
    src = np.repeat(np.arange(g.n, dtype=np.int64), np.diff(g.indptr))
    return src.tolist(), g.indices.tolist()


def networkx_graph(n: int, src: list[int], dst: list[int]) -> Any:
    import networkx as nx

    d = nx.DiGraph()
    d.add_nodes_from(range(n))
    d.add_edges_from(zip(src, dst, strict=True))
    return d


def networkx_levels(graph: Any) -> list[list[int]]:
    import networkx as nx

    return [sorted(gen) for gen in nx.topological_generations(graph)]


def graphlib_sorter(n: int, src: list[int], dst: list[int]) -> graphlib.TopologicalSorter[int]:
    sorter: graphlib.TopologicalSorter[int] = graphlib.TopologicalSorter()
    for i in range(n):
        sorter.add(i)
    for a, b in zip(src, dst, strict=True):
        sorter.add(b, a)
    return sorter


def graphlib_levels(sorter: graphlib.TopologicalSorter[int]) -> list[list[int]]:
    sorter.prepare()
    levels = []
    while sorter.is_active():
        ready = sorter.get_ready()
        levels.append(sorted(ready))
        sorter.done(*ready)
    return levels


def podgraph_levels(g: PodGraph) -> list[list[int]]:
    level = g.levels()
    order = np.argsort(level, kind="stable")
    bounds = np.searchsorted(level[order], np.arange(int(level.max(initial=-1)) + 2))
    return [order[bounds[k]:bounds[k + 1]].tolist() for k in range(len(bounds) - 1)]


@dataclass(frozen=True)
class Measured:
    name: str
    build_seconds: float
    levels_seconds: float
    held_bytes: int  # what the built graph holds (tracemalloc: numpy reports its buffers)
    levels: list[list[int]]


def _held(build: Callable[[], Any]) -> tuple[Any, float, int]:
    gc.collect()
    tracemalloc.start()
    t0 = time.perf_counter()
    out = build()
    seconds = time.perf_counter() - t0
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return out, seconds, held


def measure_all(g: PodGraph, progress: Callable[[int], Any] | None = None) -> list[Measured]:
    """Build the same graph three ways from its edge list, level it, and say what each held;
    `progress(1)` after each of the three (a progress bar's update)."""
    tick = progress or (lambda _n: None)
    src, dst = edge_lists(g)
    src_np, dst_np = np.asarray(src), np.asarray(dst)
    out = []
    ours, t_build, held = _held(lambda: PodGraph.from_edges(g.n, src_np, dst_np, names=g.names))
    t0 = time.perf_counter()
    levels = podgraph_levels(ours)
    out.append(Measured("PodGraph (numpy CSR)", t_build, time.perf_counter() - t0, held, levels))
    tick(1)
    del ours
    d, t_build, held = _held(lambda: networkx_graph(g.n, src, dst))
    t0 = time.perf_counter()
    levels = networkx_levels(d)
    out.append(Measured("networkx DiGraph", t_build, time.perf_counter() - t0, held, levels))
    tick(1)
    del d
    sorter, t_build, held = _held(lambda: graphlib_sorter(g.n, src, dst))
    t0 = time.perf_counter()
    levels = graphlib_levels(sorter)
    out.append(Measured("graphlib TopologicalSorter", t_build, time.perf_counter() - t0, held, levels))
    tick(1)
    return out
