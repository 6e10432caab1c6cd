"""Pods held at Permit as kube-scheduler holds them (framework/runtime/waiting_pods_map.go): a pod
waits until every Permit plugin that returned Wait allows it, each plugin with its own timeout;
one Reject rejects it, in that plugin's name. Plugins reach the pod through the Handle's
iterate_over_waiting_pods / get_waiting_pod, as a WaitingPod."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from minisched.clock import VirtualClock
from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import WaitingPod
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.framework.waiting_pods_map import PodAtPermit
from minisched.scheduler.plugins import in_tree_registry
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import node_of, wait_for_nodes, wait_until


class _Hold:
    """A Permit plugin that holds every pod for `seconds`."""

    def __init__(self, name: str, seconds: float) -> None:
        self.name = name
        self.seconds = seconds

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        return Status.wait(self.name), self.seconds


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster()
    c.create(NODES, make_node("n1"))
    yield c
    c.close()


def _factory(hold: _Hold) -> Any:
    return lambda args, handle: hold


def _scheduler(cluster: EmbeddedCluster, clock: VirtualClock, *holds: _Hold) -> Scheduler:
    registry = in_tree_registry()
    for hold in holds:
        registry.register(hold.name, _factory(hold))
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "profiles": [{"schedulerName": "minisched",
                            "plugins": {"permit": {"enabled": [{"name": h.name} for h in holds]}}}]}
    return Scheduler(cluster, config=config, registry=registry, clock=clock)


def _waiting(sched: Scheduler, cluster: EmbeddedCluster, name: str) -> WaitingPod:
    uid = cluster.get(PODS, name, "default")["metadata"]["uid"]
    wait_until(lambda: sched.handle.get_waiting_pod(uid) is not None, what=f"{name} waiting at Permit")
    waiting = sched.handle.get_waiting_pod(uid)
    assert waiting is not None
    return waiting


def _condition(sched: Scheduler, cluster: EmbeddedCluster, name: str) -> dict[str, Any]:
    sched.recorder.flush()
    (cond,) = [c for c in cluster.get(PODS, name, "default")["status"].get("conditions") or []
               if c["type"] == "PodScheduled"]
    return dict(cond)


def test_a_pod_two_plugins_hold_is_bound_once_both_allowed_it(cluster: EmbeddedCluster) -> None:
    clock = VirtualClock()  # no timeout expires unless the test says so
    with _scheduler(cluster, clock, _Hold("A", 30), _Hold("B", 30)) as sched:
        wait_for_nodes(sched, 1)
        cluster.create(PODS, make_pod("p"))
        waiting = _waiting(sched, cluster, "p")
        assert sorted(waiting.pending_plugins()) == ["A", "B"]
        waiting.allow("A")
        assert waiting.pending_plugins() == ["B"]
        time.sleep(0.5)  # the time a wrongly released pod would need to bind
        assert node_of(cluster, "p") is None, "bound while B still held it"
        waiting.allow("B")
        wait_until(lambda: node_of(cluster, "p") == "n1", what="p bound once B allowed it too")
        assert sched.handle.get_waiting_pod(waiting.pod["metadata"]["uid"]) is None


def test_one_plugins_reject_rejects_the_pod_in_its_name(cluster: EmbeddedCluster) -> None:
    clock = VirtualClock()
    with _scheduler(cluster, clock, _Hold("A", 30), _Hold("B", 30)) as sched:
        wait_for_nodes(sched, 1)
        cluster.create(PODS, make_pod("p"))
        waiting = _waiting(sched, cluster, "p")
        waiting.allow("A")
        waiting.reject("B", "B says no")
        wait_until(lambda: sched.queue.where("default/p") == "unschedulable", what="p parked")
        assert sched.queue.get("default/p").unschedulable_plugins == {"B"}  # type: ignore[union-attr]
        cond = _condition(sched, cluster, "p")
        assert (cond["reason"], cond["message"]) == ("Unschedulable", "B says no")
        assert node_of(cluster, "p") is None


def test_each_plugin_holds_the_pod_for_its_own_timeout(cluster: EmbeddedCluster) -> None:
    """kube arms a timer per plugin: the shorter timeout of a plugin still pending rejects the pod
    in that plugin's name; a plugin that allowed has its timer stopped."""
    clock = VirtualClock()
    with _scheduler(cluster, clock, _Hold("Short", 10), _Hold("Long", 30)) as sched:
        wait_for_nodes(sched, 1)
        cluster.create(PODS, make_pod("expires"))
        _waiting(sched, cluster, "expires")
        clock.advance(11)  # Short's 10 s pass, Long's 30 s do not
        wait_until(lambda: sched.queue.where("default/expires") == "unschedulable", what="rejected at Short's timeout")
        assert sched.queue.get("default/expires").unschedulable_plugins == {"Short"}  # type: ignore[union-attr]
        assert _condition(sched, cluster, "expires")["message"] == \
            "rejected due to timeout after waiting 10s at plugin Short"

        cluster.create(PODS, make_pod("allowed-short"))
        waiting = _waiting(sched, cluster, "allowed-short")
        waiting.allow("Short")
        clock.advance(11)  # Short allowed: its timeout no longer counts
        time.sleep(0.5)  # the binding worker polls the clock every 20 ms
        assert sched.handle.get_waiting_pod(waiting.pod["metadata"]["uid"]) is waiting
        assert sched.queue.where("default/allowed-short") != "unschedulable"
        clock.advance(20)  # Long's 30 s pass
        wait_until(lambda: sched.queue.where("default/allowed-short") == "unschedulable",
                   what="rejected at Long's timeout")
        assert _condition(sched, cluster, "allowed-short")["message"] == \
            "rejected due to timeout after waiting 30s at plugin Long"


def test_deleting_a_waiting_pod_rejects_it_through_the_handle(cluster: EmbeddedCluster) -> None:
    clock = VirtualClock()
    with _scheduler(cluster, clock, _Hold("A", 30)) as sched:
        wait_for_nodes(sched, 1)
        cluster.create(PODS, make_pod("p"))
        waiting = _waiting(sched, cluster, "p")
        assert isinstance(waiting, PodAtPermit)
        cluster.delete(PODS, "p", "default")
        wait_until(lambda: len(sched.handle.waiting) == 0, what="the deleted pod let go")
        assert waiting.status.is_rejected and waiting.status.message() == "removed"
        assert sched.cache.assumed_count() == 0
