"""Asynchronous preemption (kube's SchedulerAsyncPreemption, on by default since 1.33): the victims'
API calls run off the scheduling cycle, the preemptor waits (kube's PreEnqueue) until the last
victim's deletion has started, and an API error sends it straight back to activeQ."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from minisched.clock import VirtualClock
from minisched.cluster.embedded import EmbeddedCluster, Kubelet
from minisched.errors import ApiError
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import node_of, priority_classes, wait_until


class _HeldDeletes(EmbeddedCluster):
    """Deletes of the pods named in `held` wait until `release` is set; `fail` makes them fail."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__(clock=clock)
        self.held: set[str] = set()
        self.deleting = threading.Event()
        self.release = threading.Event()
        self.fail = False
        self.deleting_name = ""

    def delete(self, resource: Any, name: str, namespace: str | None = None, **kw: Any) -> Any:
        if resource == PODS and name in self.held:
            self.deleting_name = name
            self.deleting.set()
            if self.fail:
                raise ApiError("injected", status=500)
            self.release.wait(120)
        return super().delete(resource, name, namespace, **kw)


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def cluster(clock: VirtualClock) -> Iterator[_HeldDeletes]:
    c = _HeldDeletes(clock)
    priority_classes(c, low=10, high=1000)
    yield c
    c.release.set()
    c.close()


def _setup(cluster: _HeldDeletes, clock: VirtualClock) -> Scheduler:
    cluster.create(NODES, make_node("n1", cpu="1"))
    cluster.create(NODES, make_node("n2", cpu="1"))
    cluster.create(PODS, make_pod("victim", cpu="1", memory=None, priority_class_name="low", node_name="n1"))
    cluster.create(PODS, make_pod("other", cpu="1", memory=None, priority_class_name="high", node_name="n2"))
    cluster.held.add("victim")
    sched = Scheduler(cluster, clock=clock, seed=1)
    sched.start(loop=False)
    wait_until(lambda: sched.cache.pod_count() == 2, what="pods in cache")
    cluster.create(PODS, make_pod("vip", cpu="1", memory=None, priority_class_name="high"))
    wait_until(lambda: sched.pending_pods()["active"] == 1, what="vip queued")
    return sched


def _cycle_returns(sched: Scheduler) -> bool:
    """Run one scheduling cycle on a thread; True once it has returned (generous deadline)."""
    done = threading.Event()

    def run() -> None:
        sched.schedule_one(0)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done.wait(60)


def test_the_cycle_does_not_wait_for_the_victims_deletion_and_the_preemptor_waits_for_it(
    cluster: _HeldDeletes, clock: VirtualClock
) -> None:
    sched = _setup(cluster, clock)
    try:
        assert _cycle_returns(sched), "the scheduling cycle waited for the victim's DELETE"
        wait_until(cluster.deleting.is_set, what="the victim's DELETE under way")
        assert sched.queue.nominated_node_of("default/vip") == "n1"
        assert sched.queue.where("default/vip") == "unschedulable"
        # Another pod leaves: an event that would move vip, but its preemption is still running.
        cluster.delete(PODS, "other", "default", grace_period_seconds=0)
        wait_until(lambda: sched.cache.pod_count() == 1, what="other gone from the cache")
        clock.advance(30)
        sched.queue.flush_backoff_completed()
        assert sched.queue.where("default/vip") == "unschedulable", "held while its victim is asked to go"
        assert sched.stats.preemptions == 1
        cluster.release.set()  # the victim's DELETE goes through, its graceful deletion completes
        wait_until(lambda: cluster.get(PODS, "victim", "default")["metadata"].get("deletionTimestamp"),
                   what="the victim terminating")
        # other's deletion was held back while the run held vip: that event is not coming again,
        # so the run's end activates vip (kube drops it, and vip waits for the victim's deletion)
        wait_until(lambda: sched.queue.where("default/vip") == "active", what="vip activated as its run ended")
        Kubelet(cluster).sync()
        wait_until(lambda: sched.cache.pod_count() == 0, what="the victim gone from the cache")
        assert sched.schedule_one(0) and sched.wait_for_bindings()
        assert node_of(cluster, "vip") == "n1"  # nominated node first (n2 is free too)
        assert sched.stats.preemptions == 1, "preempted once"
    finally:
        cluster.release.set()
        sched.stop()


def test_a_failed_victim_call_activates_the_preemptor(cluster: _HeldDeletes, clock: VirtualClock) -> None:
    cluster.fail = True
    sched = _setup(cluster, clock)
    try:
        assert _cycle_returns(sched)
        # activated: to activeQ, or to backoffQ when the DELETE failed before the cycle had parked
        # vip (kube's EventForceActivate for an in-flight pod: retried after its backoff)
        wait_until(lambda: sched.queue.where("default/vip") in ("active", "backoff"),
                   what="vip activated after the DELETE failed")
        assert node_of(cluster, "vip") is None
    finally:
        sched.stop()


def test_a_victim_gone_before_its_call_activates_the_preemptor(cluster: _HeldDeletes, clock: VirtualClock) -> None:
    """A victim can be gone from the API while the scheduler's cache still has it (deleted for the
    preemptor's earlier attempt): its deletion's event then reaches the queue while the run holds
    the preemptor, and is dropped. Nothing else would move the preemptor (kube leaves it parked
    until the 5-minute flush); scheduler_perf's PreemptionBasic timed out on it."""
    cluster.create(NODES, make_node("n1", cpu="2"))
    for name in ("v1", "v2"):
        cluster.create(PODS, make_pod(name, cpu="1", memory=None, priority_class_name="low", node_name="n1"))
    cluster.held.update({"v1", "v2"})
    sched = Scheduler(cluster, clock=clock, seed=1)
    sched.start(loop=False)
    try:
        wait_until(lambda: sched.cache.pod_count() == 2, what="pods in cache")
        cluster.create(PODS, make_pod("vip", cpu="2", memory=None, priority_class_name="high"))
        wait_until(lambda: sched.pending_pods()["active"] == 1, what="vip queued")
        assert _cycle_returns(sched)
        wait_until(cluster.deleting.is_set, what="the first victim's DELETE under way")
        other = ({"v1", "v2"} - {cluster.deleting_name}).pop()
        cluster.held.discard(other)
        cluster.delete(PODS, other, "default", grace_period_seconds=0)  # gone before its call
        wait_until(lambda: sched.cache.pod_count() == 1, what="the other victim gone from the cache")
        assert sched.queue.where("default/vip") == "unschedulable", "its deletion's event came while held"
        cluster.release.set()  # the first victim terminates (graceful, no kubelet here)
        wait_until(lambda: sched.queue.where("default/vip") == "active",
                   what="vip activated once its preemption ended with a victim already gone")
    finally:
        cluster.release.set()
        sched.stop()
