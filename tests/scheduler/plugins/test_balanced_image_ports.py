"""NodeResourcesBalancedAllocation, ImageLocality, NodePorts, NodeUnschedulable, NodeName,
PrioritySort, SchedulingGates and DefaultBinder edge cases."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from minisched.errors import Conflict
from minisched.objects import make_node, make_pod, toleration
from minisched.scheduler.framework.cycle_state import BIND_RESOURCE_VERSION, CycleState
from minisched.scheduler.framework.runtime import SimpleHandle
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins import (
    default_binder,
    image_locality,
    node_name,
    node_ports,
    node_resources_balanced_allocation,
    node_unschedulable,
    priority_sort,
    scheduling_gates,
)
from minisched.scheduler.plugins.node_resources_fit import ResourceSpec
from tests.scheduler.plugins.randomcluster import table_of

MB = 1024 * 1024
ALL = np.arange(2, dtype=np.intp)


def test_balanced_allocation_std_formula() -> None:
    # kube's balanced_allocation_test: cpu 3000/10000 = 0.3, memory 5000/20000 = 0.25 -> std 0.025 -> 97
    table = table_of([make_node("n1", cpu="10", memory="20000"), make_node("n2", cpu="6", memory="10000")])
    pod = PodInfo.from_pod(make_pod("p", cpu="3", memory="5000"))
    plugin = node_resources_balanced_allocation.NodeResourcesBalancedAllocation()
    assert plugin.score(CycleState(), pod, table, ALL).tolist() == [97, 100]  # n2: 0.5 and 0.5
    three = node_resources_balanced_allocation.NodeResourcesBalancedAllocation(
        [ResourceSpec("cpu"), ResourceSpec("memory"), ResourceSpec("ephemeral-storage")])
    # ephemeral-storage allocatable 0 on these nodes: left out, so the 2-resource formula still applies
    assert three.score(CycleState(), pod, table, ALL).tolist() == [97, 100]
    assert node_resources_balanced_allocation.balanced_score([3, 5, 1], [10, 20, 10]) == int(
        (1 - np.std([0.3, 0.25, 0.1])) * 100)


def test_balanced_allocation_skips_best_effort_pods() -> None:
    plugin = node_resources_balanced_allocation.NodeResourcesBalancedAllocation()
    pod = PodInfo.from_pod(make_pod("p", cpu=None, memory=None))
    assert plugin.pre_score(CycleState(), pod, table_of([make_node("n")]), ALL[:1]).is_skip


def test_image_locality_formula() -> None:
    nodes = [make_node("a", images=[("app:1", 250 * MB)]), make_node("b"), make_node("c", images=[("redis:latest", 2000 * MB)])]
    table = table_of(nodes)
    rows = np.arange(3, dtype=np.intp)
    plugin = image_locality.ImageLocality()
    # app:1 on 1 of 3 nodes: 250MB/3 = 83.3MB -> 100 * (83.3 - 23) / (1000 - 23) = 6
    assert plugin.score(CycleState(), PodInfo.from_pod(make_pod("p", image="app:1")), table, rows).tolist() == [6, 0, 0]
    # "redis" means "redis:latest"; 2000MB/3 = 666MB -> 65
    assert plugin.score(CycleState(), PodInfo.from_pod(make_pod("p", image="redis")), table, rows).tolist() == [0, 0, 65]
    assert image_locality.calculate_priority(10 * MB, 1) == 0
    assert image_locality.calculate_priority(5000 * MB, 1) == 100
    assert image_locality.calculate_priority(1500 * MB, 2) == 100 * (1500 - 23) // (2000 - 23)


def test_image_locality_size_is_the_first_holders_as_kubes_cache() -> None:
    """kube 1.35.4 backend/cache/cache.go addNodeImageStates / removeNodeImageStates: an image's
    size is the one the first node holding it reported, kept while any node holds it; a node's
    update removes then re-adds its images. One container of app:1 on every node that has it, so
    score = 100 * (size * holders/nodes - 23Mi) / (1000Mi - 23Mi) (calculatePriority)."""
    from minisched.scheduler.snapshot import NodeTable

    plugin = image_locality.ImageLocality()
    pod = PodInfo.from_pod(make_pod("p", image="app:1"))
    table = NodeTable()

    def scores() -> list[int]:
        snap = table.snapshot()
        return plugin.score(CycleState(), pod, snap, np.arange(len(snap), dtype=np.intp)).tolist()

    table.add_node(make_node("a", images=[("app:1", 300 * MB)]))
    table.add_node(make_node("b", images=[("app:1", 600 * MB)]))
    assert scores() == [28, 28]  # both 300Mi, the first holder's: 100 * 277 / 977 = 28
    table.remove_node("a")
    assert scores() == [28]  # b still holds it: still 300Mi
    table.remove_node("b")
    table.add_node(make_node("c", images=[("app:1", 800 * MB)]))
    assert scores() == [79]  # nobody held it: c's 800Mi, 100 * 777 / 977 = 79
    table.update_node(make_node("c", images=[("app:1", 500 * MB)]))
    assert scores() == [48]  # c alone held it: its update reports anew, 100 * 477 / 977 = 48
    table.add_node(make_node("d", images=[("app:1", 900 * MB)]))
    table.update_node(make_node("c", images=[("app:1", 100 * MB)]))
    assert scores() == [48, 48]  # d held it meanwhile: 500Mi stays for both
    # a first holder reporting 0 bytes sets 0, which a later holder does not replace
    zero = NodeTable()
    zero.add_node(make_node("z", images=[("app:1", 0)]))
    zero.add_node(make_node("y", images=[("app:1", 700 * MB)]))
    snap = zero.snapshot()
    assert plugin.score(CycleState(), pod, snap, np.arange(2, dtype=np.intp)).tolist() == [0, 0]
    # the pure rule, given the nodes in the order they were added, agrees
    nodes = [make_node("a", images=[("app:1", 300 * MB)]), make_node("b", images=[("app:1", 600 * MB)])]
    assert [image_locality.node_score(pod, n, nodes) for n in nodes] == [28, 28]


def test_node_ports() -> None:
    ports = node_ports.NodePorts()
    table = table_of([make_node("a"), make_node("b")], {"a": [make_pod("web", host_ports=[80])]})
    assert ports.filter(CycleState(), PodInfo.from_pod(make_pod("p", host_ports=[80])), table).passed.tolist() == [False, True]
    assert ports.filter(CycleState(), PodInfo.from_pod(make_pod("p", host_ports=[81])), table).passed.tolist() == [True, True]
    udp = make_pod("u", host_ports=[80])
    udp["spec"]["containers"][0]["ports"][0]["protocol"] = "UDP"
    assert ports.filter(CycleState(), PodInfo.from_pod(udp), table).passed.tolist() == [True, True]
    on_ip = make_pod("ip", host_ports=[90])
    on_ip["spec"]["containers"][0]["ports"][0]["hostIP"] = "10.0.0.1"
    other_ip = make_pod("ip2", host_ports=[90])
    other_ip["spec"]["containers"][0]["ports"][0]["hostIP"] = "10.0.0.2"
    table = table_of([make_node("a")], {"a": [on_ip]})
    assert ports.filter(CycleState(), PodInfo.from_pod(other_ip), table).passed.tolist() == [True]
    assert ports.filter(CycleState(), PodInfo.from_pod(make_pod("any", host_ports=[90])), table).passed.tolist() == [False]
    assert ports.filter(CycleState(), PodInfo.from_pod(make_pod("x", host_ports=[90])), table).reasons_at(0) == (
        node_ports.REASON,)


def test_node_unschedulable_and_node_name() -> None:
    table = table_of([make_node("a", unschedulable=True), make_node("b")])
    plain = PodInfo.from_pod(make_pod("p"))
    assert node_unschedulable.NodeUnschedulable().filter(CycleState(), plain, table).passed.tolist() == [False, True]
    tolerant = PodInfo.from_pod(make_pod("t", tolerations=[toleration("node.kubernetes.io/unschedulable", operator="Exists",
                                                                      effect="NoSchedule")]))
    assert node_unschedulable.NodeUnschedulable().filter(CycleState(), tolerant, table).passed.tolist() == [True, True]
    pinned = PodInfo.from_pod(make_pod("n", node_name="b"))
    assert node_name.NodeName().filter(CycleState(), pinned, table).passed.tolist() == [False, True]
    ghost = PodInfo.from_pod(make_pod("g", node_name="nowhere"))
    assert node_name.NodeName().filter(CycleState(), ghost, table).passed.tolist() == [False, False]


@dataclass
class Queued:
    priority: int
    timestamp: float


def test_priority_sort_and_gates() -> None:
    less = priority_sort.PrioritySort().less
    assert less(Queued(10, 5.0), Queued(1, 1.0))
    assert less(Queued(1, 1.0), Queued(1, 2.0))
    assert not less(Queued(1, 2.0), Queued(1, 2.0))
    gates = scheduling_gates.SchedulingGates()
    assert gates.pre_enqueue(make_pod("p")).is_success
    status = gates.pre_enqueue(make_pod("p", scheduling_gates=["a", "b"]))
    assert status.is_rejected and status.message() == "waiting for scheduling gates: [a b]"


class FakeCluster:
    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.error = error

    def bind(self, namespace: str, name: str, node_name: str, *, uid: str | None = None,
             resource_version: str | None = None) -> None:
        self.calls.append((namespace, name, node_name, uid, resource_version))
        if self.error:
            raise self.error


def test_default_binder() -> None:
    cluster = FakeCluster()
    binder = default_binder.DefaultBinder(SimpleHandle(cluster=cluster))  # type: ignore[arg-type]
    pod = make_pod("p")
    pod["metadata"]["uid"] = "u1"
    assert binder.bind(CycleState(), PodInfo.from_pod(pod), "n1").is_success
    assert cluster.calls == [("default", "p", "n1", "u1", None)]  # as kube-scheduler's: the UID only
    state = CycleState()
    state.write(BIND_RESOURCE_VERSION, "42")  # a sharded replica's binding: the pod as it decided on it
    assert binder.bind(state, PodInfo.from_pod(pod), "n1").is_success
    assert cluster.calls[-1] == ("default", "p", "n1", "u1", "42")
    conflicted = default_binder.DefaultBinder(SimpleHandle(cluster=FakeCluster(Conflict("already bound"))))  # type: ignore[arg-type]
    status = conflicted.bind(CycleState(), PodInfo.from_pod(pod), "n1")
    assert status.is_error and isinstance(status.error, Conflict) and status.plugin == "DefaultBinder"
