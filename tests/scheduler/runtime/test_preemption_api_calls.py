"""The API calls one preemption makes, counted on the embedded cluster, against kube-scheduler's:
per victim one status PATCH (a strategic merge patch computed from the cached copy, as kube's
util.PatchPodStatus: no GET of the victim) and one DELETE. The strategic patch merges the
DisruptionTarget condition by its type into the conditions the server has, so a condition another
writer set after the scheduler's cache saw the pod is kept (a JSON merge patch of the whole list
built from an earlier read would drop it)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from minisched.clock import VirtualClock
from minisched.cluster.embedded import EmbeddedCluster, Kubelet
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS, resolve
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import (
    advance_until,
    node_of,
    priority_classes,
    wait_for_nodes,
    wait_until,
)

VICTIMS = ("v1", "v2", "v3")


class _Counting(EmbeddedCluster):
    """Counts the scheduler's pod calls by verb (those made off the test's own thread); before each
    victim's status PATCH another writer adds a condition."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock=clock)
        self.calls: Counter[tuple[str, str]] = Counter()
        self.counting = False
        self._mu = threading.Lock()

    def _count(self, verb: str, resource: Any, detail: str = "") -> None:
        if self.counting and resolve(resource) == PODS and threading.current_thread() is not threading.main_thread():
            with self._mu:
                self.calls[(verb, detail)] += 1

    def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
        self._count("get", resource)
        return super().get(resource, name, namespace)

    def patch(self, resource: Any, name: str, patch: Any, namespace: str | None = None, **kw: Any) -> Any:
        self._count("patch", resource, f"{kw.get('subresource')}/{kw.get('patch_type', 'merge')}")
        if self.counting and resolve(resource) == PODS and name in VICTIMS and kw.get("subresource") == "status":
            # a kubelet writes a condition between the scheduler's cache and its patch
            current = super().get(PODS, name, namespace)
            conditions = [*current["status"].get("conditions", []), {"type": "ContainersReady", "status": "True"}]
            super().patch(PODS, name, {"status": {"conditions": conditions}}, namespace, subresource="status")
        return super().patch(resource, name, patch, namespace, **kw)

    def delete(self, resource: Any, name: str, namespace: str | None = None, **kw: Any) -> Any:
        self._count("delete", resource)
        return super().delete(resource, name, namespace, **kw)

    def bind(self, namespace: str, name: str, node_name: str, *, uid: str | None = None) -> None:
        self._count("bind", PODS)
        super().bind(namespace, name, node_name, uid=uid)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def cluster(clock: VirtualClock) -> Iterator[_Counting]:
    c = _Counting(clock)
    priority_classes(c, low=10, high=1000)
    yield c
    c.close()


def test_one_status_patch_and_one_delete_per_victim_and_no_get(cluster: _Counting, clock: VirtualClock) -> None:
    cluster.create(NODES, make_node("n1", cpu="3"))
    for name in VICTIMS:
        cluster.create(PODS, make_pod(name, cpu="1", memory=None, priority_class_name="low", node_name="n1"))
        cluster.patch(PODS, name, {"status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}},
                      "default", subresource="status")
    sched = Scheduler(cluster, clock=clock, seed=1)
    sched.start()
    try:
        wait_for_nodes(sched, 1)
        wait_until(lambda: sched.cache.pod_count() == 3, what="victims in cache")
        cluster.counting = True
        cluster.create(PODS, make_pod("vip", cpu="3", memory=None, priority_class_name="high"))
        wait_until(lambda: all(cluster.get(PODS, v, "default")["metadata"].get("deletionTimestamp") for v in VICTIMS),
                   what="every victim terminating")
        for name in VICTIMS:
            conditions = {c["type"]: c for c in cluster.get(PODS, name, "default")["status"]["conditions"]}
            assert set(conditions) == {"PodScheduled", "ContainersReady", "DisruptionTarget"}, (
                "the other writer's condition is kept")
            assert conditions["DisruptionTarget"]["reason"] == "PreemptionByScheduler"
        Kubelet(cluster).sync()
        advance_until(clock, lambda: node_of(cluster, "vip") == "n1", timeout=60, what="vip bound to n1")
        cluster.counting = False
        calls = dict(cluster.calls)
        assert calls.get(("get", ""), 0) == 0, f"no GET of a victim (kube patches from its cache): {calls}"
        assert calls.get(("patch", "status/strategic")) == len(VICTIMS), calls
        assert calls.get(("delete", "")) == len(VICTIMS), calls
        assert calls.get(("bind", "")) == 1, calls
    finally:
        sched.stop()


def test_a_victim_already_marked_gets_no_status_patch(cluster: _Counting, clock: VirtualClock) -> None:
    from minisched.scheduler.framework.runtime import SimpleHandle
    from minisched.scheduler.framework.types import PodInfo
    from minisched.scheduler.plugins.default_preemption import DefaultPreemption

    plugin = DefaultPreemption({"schedulerName": "minisched"}, SimpleHandle())
    cluster.create(NODES, make_node("n1", cpu="1"))
    pod = cluster.create(PODS, make_pod("v1", cpu="1", memory=None, priority_class_name="low", node_name="n1"))
    cluster.counting = True

    def mark(p: dict) -> None:  # on another thread, as the preemption workers call
        thread = threading.Thread(target=plugin.executor.mark_disruption_target, args=(cluster, PodInfo.from_pod(p)))
        thread.start()
        thread.join(60)

    mark(pod)
    marked = cluster.get(PODS, "v1", "default")
    assert cluster.calls[("patch", "status/strategic")] == 1
    # the cached copy had no conditions, so no $setElementOrder: the server puts the new one first,
    # as it does for kube's patch (the other writer's condition stays)
    assert [c["type"] for c in marked["status"]["conditions"]] == ["DisruptionTarget", "ContainersReady"]
    mark(marked)  # the cache has seen the condition
    assert cluster.calls[("patch", "status/strategic")] == 1, "kube's UpdatePodCondition: unchanged, no call"


class _Overlap(EmbeddedCluster):
    """Records, for each victim's DELETE as it starts, how many other victims' DELETEs are in
    flight and how many have returned; the first waits (up to a deadline) for a second to start."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock=clock)
        self._mu = threading.Condition()
        self.in_flight = 0
        self.started = 0
        self.returned = 0
        self.seen: list[tuple[str, int, int]] = []  # (victim, in flight with it, returned before it)

    def delete(self, resource: Any, name: str, namespace: str | None = None, **kw: Any) -> Any:
        if resolve(resource) != PODS or name not in VICTIMS:
            return super().delete(resource, name, namespace, **kw)
        with self._mu:
            self.in_flight += 1
            self.started += 1
            self.seen.append((name, self.in_flight - 1, self.returned))
            self._mu.notify_all()
            # generous: returns as soon as a second DELETE starts; only a serial preemption waits it out
            self._mu.wait_for(lambda: self.started >= 2, timeout=30)
        try:
            return super().delete(resource, name, namespace, **kw)
        finally:
            with self._mu:
                self.in_flight -= 1
                self.returned += 1


def test_victims_but_the_last_are_deleted_in_parallel_then_the_last(clock: VirtualClock) -> None:
    cluster = _Overlap(clock)
    priority_classes(cluster, low=10, high=1000)
    cluster.create(NODES, make_node("n1", cpu="3"))
    for name in VICTIMS:
        cluster.create(PODS, make_pod(name, cpu="1", memory=None, priority_class_name="low", node_name="n1"))
    sched = Scheduler(cluster, clock=clock, seed=1)
    sched.start()
    try:
        wait_for_nodes(sched, 1)
        wait_until(lambda: sched.cache.pod_count() == 3, what="victims in cache")
        cluster.create(PODS, make_pod("vip", cpu="3", memory=None, priority_class_name="high"))
        wait_until(lambda: cluster.returned == len(VICTIMS), what="every victim's DELETE returned")
        first, second, last = cluster.seen
        assert second[1:] == (1, 0), f"the first two DELETEs overlap (kube's parallelizer): {cluster.seen}"
        assert last[1:] == (0, 2), f"the last victim's DELETE after the others returned: {cluster.seen}"
        assert {first[0], second[0], last[0]} == set(VICTIMS), "each victim deleted once"
        Kubelet(cluster).sync()
        advance_until(clock, lambda: node_of(cluster, "vip") == "n1", timeout=60, what="vip bound to n1")
    finally:
        sched.stop()
        cluster.close()
