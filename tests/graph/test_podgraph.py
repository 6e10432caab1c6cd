"""PodGraph against networkx and graphlib: same levels, same components, cycles named."""

from __future__ import annotations

import graphlib

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minisched.graph import UNLEVELED, DependencyCycle, PodGraph, random_dag


def to_networkx(g: PodGraph) -> nx.DiGraph:
    out = nx.DiGraph()
    out.add_nodes_from(range(g.n))
    src = np.repeat(np.arange(g.n), np.diff(g.indptr))
    out.add_edges_from(zip(src.tolist(), g.indices.tolist(), strict=True))
    return out


def test_levels_equal_networkx_topological_generations_on_a_seeded_graph() -> None:
    g = random_dag(20_000, edges_per_node=2.0, seed=7)
    ours = [sorted(int(x) for x in gen) for gen in g.generations()]
    theirs = [sorted(gen) for gen in nx.topological_generations(to_networkx(g))]
    assert len(ours) > 5  # a deep enough graph for the comparison to mean something
    assert ours == theirs


def test_levels_agree_with_graphlib_order() -> None:
    g = random_dag(2_000, edges_per_node=3.0, seed=1)
    level = g.levels()
    sorter: graphlib.TopologicalSorter[int] = graphlib.TopologicalSorter()
    src = np.repeat(np.arange(g.n), np.diff(g.indptr))
    for i in range(g.n):
        sorter.add(i)
    for a, b in zip(src.tolist(), g.indices.tolist(), strict=True):
        sorter.add(b, a)
    sorter.prepare()
    depth = 0
    while sorter.is_active():
        ready = sorter.get_ready()
        assert set(np.flatnonzero(level == depth).tolist()) == set(ready)
        sorter.done(*ready)
        depth += 1


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30).flatmap(
    lambda n: st.tuples(st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=60))))
def test_any_graph_levels_components_and_cycles_match_networkx(case: tuple[int, list[tuple[int, int]]]) -> None:
    n, edges = case
    edges = sorted(set(edges))
    g = PodGraph.from_edges(n, [a for a, _ in edges], [b for _, b in edges])
    ref = nx.DiGraph()
    ref.add_nodes_from(range(n))
    ref.add_edges_from(edges)
    count, labels = g.strong_components()
    assert count == nx.number_strongly_connected_components(ref)
    for comp in nx.strongly_connected_components(ref):
        assert len({int(labels[i]) for i in comp}) == 1
    if nx.is_directed_acyclic_graph(ref):
        assert g.find_cycle() is None
        assert [sorted(int(x) for x in gen) for gen in g.generations()] == \
            [sorted(gen) for gen in nx.topological_generations(ref)]
    else:
        cycle = g.find_cycle()
        assert cycle is not None and cycle[0] == cycle[-1]
        for a, b in zip(cycle, cycle[1:], strict=False):
            assert ref.has_edge(int(a), int(b)), (cycle, edges)
        level = g.levels()
        on_cycles = {i for comp in nx.strongly_connected_components(ref) for i in comp
                     if len(comp) > 1 or ref.has_edge(i, i)}
        behind = on_cycles | {d for i in on_cycles for d in nx.descendants(ref, i)}
        assert set(np.flatnonzero(level == UNLEVELED).tolist()) == behind


def test_a_cycle_is_named_through_the_pod_that_asked() -> None:
    g = PodGraph.from_dependencies({"web": ["db"], "db": ["migrate"], "migrate": ["web"], "cache": []})
    assert g.find_cycle(through="db") == ["db", "web", "migrate", "db"]
    assert g.find_cycle(through="cache") is None
    with pytest.raises(DependencyCycle, match=r"dependency cycle: .*-> .*-> .*-> .* \(each must come before the next\)"):
        g.generations()


def test_dependencies_level_in_order() -> None:
    g = PodGraph.from_dependencies({"app": ["db", "cache"], "db": ["volume"], "cache": []})
    assert g.generations() == [["cache", "volume"], ["db"], ["app"]]


def test_scipy_view_shares_the_arrays_and_they_are_read_only() -> None:
    g = random_dag(1_000, 2.0, seed=3)
    csr = g.as_csr()
    assert np.shares_memory(csr.indices, g.indices) and np.shares_memory(csr.indptr, g.indptr)
    assert np.shares_memory(g.successors(5), g.indices)
    with pytest.raises(ValueError, match="read-only"):
        g.indices[0] = 1


def test_bad_edges_are_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="out of range 0..2"):
        PodGraph.from_edges(3, [0], [3])
    with pytest.raises(ValueError, match="same length"):
        PodGraph.from_edges(3, [0, 1], [2])


def test_measure_all_levels_three_ways_alike_and_reports_each_step() -> None:
    from minisched.graph.compare import measure_all

    steps: list[int] = []
    results = measure_all(random_dag(300, edges_per_node=2.0, seed=1), progress=steps.append)
    assert [r.name for r in results] == ["PodGraph (numpy CSR)", "networkx DiGraph", "graphlib TopologicalSorter"]
    assert results[0].levels == results[1].levels == results[2].levels
    assert steps == [1, 1, 1]
    assert all(r.held_bytes > 0 for r in results)
