"""Lab 10 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from scipy.sparse.csgraph import breadth_first_order

from labs.borrowed import describe, holds, tripwires
from labs.harness import Check
from labs.lab10_waiting_pods.checks import LAB, TINY, expected, within
from minisched.graph import PodGraph, random_dag


def check_cycles_by_hand(module: Any) -> None:
    loop = PodGraph.from_dependencies({"a": ["b"], "b": ["a"], "c": ["a"]})  # a and b wait for each other
    got = within(20, lambda: module.waiting_on(loop, ["a"]), "waiting_on on a two-pod cycle")
    assert list(got) == ["b", "c"], f"a <-> b, c waits for a: waiting_on(['a']) expected ['b', 'c'], got {got}"
    selfish = PodGraph.from_dependencies({"x": ["x"], "y": ["x"]})
    got = within(20, lambda: module.waiting_on(selfish, ["x"]), "waiting_on on a pod that names itself")
    assert list(got) == ["y"], f"x names itself, y waits for x: waiting_on(['x']) expected ['y'], got {got}"
    assert list(module.waiting_on(selfish, [])) == [], "no names: nobody waits"


def check_long_chain(module: Any) -> None:
    n = 5000
    chain = PodGraph.from_edges(n, np.arange(n - 1), np.arange(1, n), names=[f"step-{i}" for i in range(n)])
    # CPython's default recursion limit for the call: a test run or notebook may have raised it, and
    # then a recursive walk would pass here and fail on the student's own machine
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        got = within(30, lambda: module.waiting_on(chain, ["step-0"]), "waiting_on along a chain of 5,000 pods")
    finally:
        sys.setrecursionlimit(limit)
    assert len(got) == n - 1 and got[0] == "step-1" and got[-1] == f"step-{n - 1}", (
        f"a chain of {n} pods, each waiting for the one before: expected the {n - 1} after step-0, got {len(got)}")


def check_big(module: Any) -> None:
    graph = random_dag(100_000, edges_per_node=2.0, seed=15)
    csr = graph.as_csr()
    for sources in ([17], [3, 99_000, 512]):
        names = [graph.names[i] for i in sources]
        got = within(30, lambda ns=names: module.waiting_on(graph, ns), "waiting_on on 100,000 pods")
        reach = np.zeros(graph.n, dtype=bool)
        for s in sources:
            reach[breadth_first_order(csr, s, directed=True, return_predecessors=False)] = True
        reach[sources] = False
        want = [graph.names[i] for i in np.flatnonzero(reach)]
        assert list(got) == want, f"100,000 pods, waiting_on({names}): expected {len(want)} pods, got {len(got)}" \
            f" (first expected {want[:3]}, got {list(got)[:3]})"


def _searches() -> list[object]:
    """Searches that already are the answer: the checks' own, and scipy's graph traversals."""
    from scipy.sparse import csgraph

    from labs.lab10_waiting_pods import checks

    return [checks.expected, *(getattr(csgraph, name) for name in (
        "breadth_first_order", "depth_first_order", "breadth_first_tree", "depth_first_tree", "shortest_path",
        "dijkstra", "bellman_ford", "johnson", "floyd_warshall", "connected_components", "reconstruct_path"))]


def check_walk_is_written(module: Any) -> None:
    graph = PodGraph.from_dependencies(TINY)
    want = expected(graph, ["volume"])
    searches = _searches()
    names = holds(module, searches)
    assert not names, (f"{', '.join(names)} in your exercise is a search that already is the answer "
                       f"({', '.join(describe(getattr(module, n)) for n in names)}): write the frontier walk")
    with tripwires(LAB, module, searches, packages=("labs", "scipy")) as (again, touched):
        problem = ""
        got: Any = None
        try:
            got = again.waiting_on(graph, ["volume"])
        except Exception as e:  # noqa: BLE001 (a tripwire, or what the walk does without the search)
            problem = f"{type(e).__name__}: {e}"
    assert not touched, (f"waiting_on calls a search that already is the answer ({touched[0]}): the lab is the "
                         f"frontier walk over graph.indptr and graph.indices, written with numpy")
    assert not problem and list(got) == want, (
        f"with the checks' own search and scipy's traversals out of reach, waiting_on(['volume']) gave "
        f"{problem or got}, expected {want}")


CHECKS = [
    Check("pods on a cycle, and a pod that names itself", check_cycles_by_hand,
          "a pod on a cycle through one of the names still is not one of the names."),
    Check("a chain of 5,000 pods", check_long_chain, "a loop over frontiers, not recursion."),
    Check("the walk is written, not borrowed", check_walk_is_written,
          "walk the frontier yourself over graph.indptr and graph.indices; neither the checks' breadth-first "
          "search nor scipy.sparse.csgraph's traversals."),
    Check("100,000 pods", check_big, "the same walk, one numpy step per frontier."),
]
