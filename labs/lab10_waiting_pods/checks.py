"""Lab 10 checks (public).

    python -m labs.lab10_waiting_pods.checks [exercise|solution|path/to/exercise.py]
"""

from __future__ import annotations

import collections
import random
import sys
from collections.abc import Callable, Sequence
from typing import Any

from labs.harness import Check, call_within, main, running_scheduler, wait_until
from minisched.graph import PodGraph
from minisched.objects import make_node, make_pod
from minisched.scheduler.plugins.pod_dependencies import DEPENDS_ON_ANNOTATION, dependencies

LAB = "lab10_waiting_pods"
TINY = {"app": ["db", "cache"], "db": ["volume"], "cache": [], "report": ["app"], "lone": []}


def within(seconds: float, fn: Callable[[], Any], what: str) -> Any:
    """fn() on a thread of its own: an answer, its exception, or a failed check if it never returns
    (a walk without a `seen` array goes round a cycle for ever)."""
    return call_within(seconds, what, fn, advice="does the walk go round a cycle?")


def expected(graph: PodGraph, names: Sequence[str]) -> list[str]:
    """A plain breadth-first search, one pod at a time."""
    sources = {graph.index_of(n) for n in names}
    seen: set[int] = set()
    todo = collections.deque(sources)
    while todo:
        for j in map(int, graph.successors(todo.popleft())):
            if j not in seen:
                seen.add(j)
                todo.append(j)
    return [graph.names[i] for i in sorted(seen - sources)]


def check_by_hand(module: Any) -> None:
    graph = PodGraph.from_dependencies(TINY)  # rows: app db cache report lone volume
    for names, want in ((["volume"], ["app", "db", "report"]), (["cache"], ["app", "report"]),
                        (["report"], []), (["db", "app"], ["report"])):
        got = module.waiting_on(graph, names)
        assert list(got) == want, f"{TINY}: waiting_on({names}) expected {want} (in row order), got {got}"
    try:
        module.waiting_on(graph, ["nope"])
    except KeyError as e:
        assert "nope" in str(e), f"the KeyError should name the missing pod: got {e!r}"
    else:
        raise AssertionError("waiting_on(graph, ['nope']): a name not in the graph should raise KeyError")


def random_graph(rng: random.Random, n: int, edges: int, cycles: bool) -> PodGraph:
    src, dst = [], []
    for _ in range(edges):
        a, b = rng.randrange(n), rng.randrange(n)
        if not cycles:
            a, b = min(a, b), max(a, b)
            if a == b:
                continue
        src.append(a)
        dst.append(b)
    return PodGraph.from_edges(n, src, dst, names=[f"pod-{i}" for i in range(n)])


def check_random(module: Any) -> None:
    rng = random.Random(10)
    for trial in range(60):
        cycles = trial >= 30  # graphs without cycles first
        n = rng.randint(1, 60)
        graph = random_graph(rng, n, rng.randint(0, 2 * n), cycles)
        names = [graph.names[rng.randrange(n)] for _ in range(rng.randint(1, 3))]
        got = within(20, lambda g=graph, ns=names: module.waiting_on(g, ns), f"trial {trial}")
        want = expected(graph, names)
        assert list(got) == want, (
            f"trial {trial} ({n} pods, {graph.edge_count} edges, {'with' if cycles else 'no'} cycles), "
            f"waiting_on({names}): expected {want[:8]}{'...' if len(want) > 8 else ''}, got {list(got)[:8]}")


CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
    "profiles": [{"schedulerName": "minisched", "plugins": {"preEnqueue": {"enabled": [{"name": "PodDependencies"}]}}}],
}


def pod(name: str, depends_on: str | None = None, **kw: Any) -> dict[str, Any]:
    obj = make_pod(name, **kw)
    if depends_on:
        obj["metadata"]["annotations"] = {DEPENDS_ON_ANNOTATION: depends_on}
    return obj


def gated(cluster: Any) -> set[str]:
    """Pending pods whose PodScheduled condition says SchedulingGated (a bound pod may still carry
    the condition written while it waited)."""
    out = set()
    for p in cluster.list("pods", "default")["items"]:
        if p["spec"].get("nodeName"):
            continue
        conditions = p["status"].get("conditions") or []
        if any(c["type"] == "PodScheduled" and c.get("reason") == "SchedulingGated" for c in conditions):
            out.add(p["metadata"]["name"])
    return out


def check_scheduler(module: Any) -> None:
    module.waiting_on(PodGraph.from_dependencies(TINY), ["db"])  # fails here first
    db = pod("db")
    db["spec"]["nodeSelector"] = {"tier": "db"}  # no such node: db stays pending
    pods = [db, pod("cache"), pod("app", "db,cache"), pod("report", "app"), pod("web", "cache"),
            pod("batch", "report"), pod("nightly", "batch,web")]
    with running_scheduler(nodes=[make_node("a", cpu="8")], config=CONFIG, loop=True) as (cluster, sched):
        for p in pods:
            cluster.create("pods", p)
        wait_until(lambda: all(cluster.get("pods", n, "default")["spec"].get("nodeName") for n in ("cache", "web")),
                   "the scheduler never bound cache and web", timeout=20)
        sched.recorder.flush()
        wait_until(lambda: len(gated(cluster)) >= 4, "the scheduler never held app, report, batch and nightly",
                   timeout=20)
        held = gated(cluster)
        graph = PodGraph.from_dependencies({p["metadata"]["name"]: dependencies(p)
                                            for p in cluster.list("pods", "default")["items"]})
    got = module.waiting_on(graph, ["db"])
    assert set(got) == held and len(got) == len(held), (
        f"db cannot be scheduled; the scheduler holds {sorted(held)} back as SchedulingGated; "
        f"waiting_on(graph, ['db']) says {got}")


CHECKS = [
    Check("a small graph by hand", check_by_hand,
          "start from the successors of the names; leave the names themselves out; answer in row order."),
    Check("agrees with a breadth-first search on random graphs", check_random,
          "mark what you have seen in a numpy bool array and only walk on from pods not seen before.", points=2),
    Check("names the pods a scheduler holds back", check_scheduler,
          "the scheduler gates every pod that waits, directly or not, for the unschedulable one.", points=2),
]

if __name__ == "__main__":
    sys.exit(main(LAB, sys.argv[1:]))
