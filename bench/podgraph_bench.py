"""The pod graph held three ways, on a seeded random DAG of --pods pods (default 100,000, about
--edges 2 dependencies per pod): minisched's PodGraph (CSR arrays, numpy + scipy), networkx's
DiGraph (dicts of dicts) and the standard library's graphlib.TopologicalSorter.

For each: the time to build the graph from the edge list, the time to compute the topological
levels (PodGraph.levels, nx.topological_generations, graphlib's get_ready/done rounds), and the
memory the built graph holds (tracemalloc: numpy reports its buffers to it). Median of --rounds.
The three level partitions are checked equal. Strong components: PodGraph via scipy's csgraph
against nx.strongly_connected_components.

    .venv/bin/python bench/podgraph_bench.py [--pods 100000] [--edges 2.0] [--rounds 3]
"""

from __future__ import annotations

import argparse
import gc
import graphlib
import statistics
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np

from minisched.graph import PodGraph, random_dag


def measure(build: Callable[[], Any]) -> tuple[Any, float, int]:
    """(result, seconds, bytes still held by the result after the call)."""
    gc.collect()
    tracemalloc.start()
    t0 = time.perf_counter()
    out = build()
    seconds = time.perf_counter() - t0
    held, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return out, seconds, held


def graphlib_levels(n: int, src: list[int], dst: list[int]) -> list[list[int]]:
    sorter: graphlib.TopologicalSorter[int] = graphlib.TopologicalSorter()
    for i in range(n):
        sorter.add(i)
    for a, b in zip(src, dst, strict=True):
        sorter.add(b, a)
    sorter.prepare()
    levels = []
    while sorter.is_active():
        ready = sorter.get_ready()
        levels.append(sorted(ready))
        sorter.done(*ready)
    return levels


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=100_000)
    ap.add_argument("--edges", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()

    ref = random_dag(args.pods, args.edges, args.seed)
    n = ref.n
    src_np = np.repeat(np.arange(n, dtype=np.int64), np.diff(ref.indptr))
    dst_np = ref.indices.copy()
    src, dst = src_np.tolist(), dst_np.tolist()
    print(f"seeded DAG: {n:,} pods, {len(src):,} dependencies (seed {args.seed})")

    rows: dict[str, list[tuple[float, float, int]]] = {"PodGraph (numpy CSR)": [], "networkx DiGraph": [],
                                                       "graphlib": []}
    results: dict[str, Any] = {}
    for _ in range(args.rounds):
        g, t_build, held = measure(lambda: PodGraph.from_edges(n, src_np, dst_np))
        t0 = time.perf_counter()
        levels = g.levels()
        t_levels = time.perf_counter() - t0
        rows["PodGraph (numpy CSR)"].append((t_build, t_levels, held))
        order = np.argsort(levels, kind="stable")
        bounds = np.searchsorted(levels[order], np.arange(int(levels.max()) + 2))
        results["ours"] = [sorted(order[bounds[k]:bounds[k + 1]].tolist()) for k in range(len(bounds) - 1)]
        del g

        def build_nx() -> nx.DiGraph:
            d = nx.DiGraph()
            d.add_nodes_from(range(n))
            d.add_edges_from(zip(src, dst, strict=True))
            return d

        d, t_build, held = measure(build_nx)
        t0 = time.perf_counter()
        gens = [sorted(gen) for gen in nx.topological_generations(d)]
        rows["networkx DiGraph"].append((t_build, time.perf_counter() - t0, held))
        results["networkx"] = gens
        del d

        # graphlib builds and levels in one object; its build is the add() calls
        def build_graphlib() -> graphlib.TopologicalSorter[int]:
            s: graphlib.TopologicalSorter[int] = graphlib.TopologicalSorter()
            for i in range(n):
                s.add(i)
            for a, b in zip(src, dst, strict=True):
                s.add(b, a)
            return s

        _, t_build, held = measure(build_graphlib)
        t0 = time.perf_counter()
        results["graphlib"] = graphlib_levels(n, src, dst)
        t_total = time.perf_counter() - t0
        rows["graphlib"].append((t_build, max(t_total - t_build, 0.0), held))

    assert results["ours"] == results["networkx"] == results["graphlib"], "level partitions differ"
    print(f"levels: {len(results['ours'])}, equal in all three\n")
    print(f"{'':24} {'build ms':>10} {'levels ms':>10} {'held MB':>9}  (median of {args.rounds})")
    for name, vals in rows.items():
        b = statistics.median(v[0] for v in vals) * 1e3
        lv = statistics.median(v[1] for v in vals) * 1e3
        mb = statistics.median(v[2] for v in vals) / 2**20
        print(f"{name:24} {b:10.1f} {lv:10.1f} {mb:9.1f}")

    g = PodGraph.from_edges(n, src_np, dst_np)
    t0 = time.perf_counter()
    count, _ = g.strong_components()
    t_scc = time.perf_counter() - t0
    d = nx.DiGraph()
    d.add_edges_from(zip(src, dst, strict=True))
    d.add_nodes_from(range(n))
    t0 = time.perf_counter()
    nx_count = sum(1 for _ in nx.strongly_connected_components(d))
    t_nx_scc = time.perf_counter() - t0
    assert count == nx_count == n
    print(f"\nstrong components: scipy csgraph {t_scc * 1e3:.1f} ms, networkx {t_nx_scc * 1e3:.1f} ms ({count:,})")
    print(f"PodGraph arrays: {g.nbytes() / 2**20:.1f} MB (indptr + indices, int64)")


if __name__ == "__main__":
    main()
