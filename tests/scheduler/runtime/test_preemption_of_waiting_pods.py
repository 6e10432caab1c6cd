"""A victim held at Permit is rejected, not deleted (kube's PreemptPod): it is not bound yet, so
rejecting it frees its reservation and sends it back to the queue, where a DELETE would lose the
pod for good. The preemptor, held while its preemption runs, is not left parked by it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from minisched.clock import VirtualClock
from minisched.cluster.embedded import EmbeddedCluster
from minisched.objects import make_node, make_pod
from minisched.resources import EVENTS, NODES, PODS
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins import in_tree_registry
from minisched.scheduler.scheduler import Scheduler
from tests.scheduler.runtime.helpers import (
    advance_until,
    node_of,
    priority_classes,
    wait_for_nodes,
    wait_until,
)


class _HoldLowPriority:
    """A Permit plugin that holds pods below priority 100 (a gang waiting for its members)."""

    name = "HoldLowPriority"

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        return (Status.wait(self.name), 3600.0) if pod.priority < 100 else (Status.success(), 0.0)


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    c = EmbeddedCluster()
    priority_classes(c, low=10, high=1000)
    c.create(NODES, make_node("n1", cpu="1"))
    yield c
    c.close()


def _scheduler(cluster: EmbeddedCluster, clock: VirtualClock) -> Scheduler:
    registry = in_tree_registry()
    hold = _HoldLowPriority()
    registry.register(hold.name, lambda args, handle: hold)
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "minisched", "plugins": {"permit": {"enabled": [{"name": hold.name}]}}}]}
    return Scheduler(cluster, config=config, registry=registry, clock=clock)


def test_a_victim_waiting_at_permit_is_rejected_and_kept(cluster: EmbeddedCluster) -> None:
    clock = VirtualClock()
    with _scheduler(cluster, clock) as sched:
        wait_for_nodes(sched, 1)
        cluster.create(PODS, make_pod("gang-member", cpu="1", memory=None, priority_class_name="low"))
        uid = cluster.get(PODS, "gang-member", "default")["metadata"]["uid"]
        wait_until(lambda: sched.handle.get_waiting_pod(uid) is not None, what="gang-member waiting at Permit")
        cluster.create(PODS, make_pod("vip", cpu="1", memory=None, priority_class_name="high"))
        advance_until(clock, lambda: node_of(cluster, "vip") == "n1", timeout=30, what="vip bound to n1")
        member = cluster.get(PODS, "gang-member", "default")  # raises NotFound if it was deleted
        assert not member["spec"].get("nodeName") and not member["metadata"].get("deletionTimestamp")
        assert sched.handle.get_waiting_pod(uid) is None
        wait_until(lambda: sched.queue.where("default/gang-member") in ("unschedulable", "backoff", "active"),
                   what="gang-member back in the queue")
        sched.recorder.flush()
        reasons = [e.get("reason") for e in cluster.list(EVENTS, "default")["items"]
                   if (e.get("involvedObject") or e.get("regarding") or {}).get("name") == "gang-member"]
        assert "Preempted" in reasons, reasons
