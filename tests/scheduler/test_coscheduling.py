"""Gang scheduling with the PodGroup CRD and the Coscheduling plugin, on every backend: a group
that fits binds together; one that does not binds none and gives back what it held."""

from __future__ import annotations

import time
from typing import Any

import pytest

from minisched.clock import VirtualClock
from minisched.cluster import Cluster
from minisched.errors import Invalid
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS
from minisched.scheduler.framework.profile import load_profiles
from minisched.scheduler.framework.runtime import Framework
from minisched.scheduler.lifecycle import GroupState
from minisched.scheduler.scheduler import Scheduler
from minisched.validation.podgroup import (
    POD_GROUP_LABEL,
    PODGROUPS,
    install_pod_group_crd,
    make_pod_group,
)
from tests.scheduler.runtime.helpers import bound_pods, wait_for_nodes, wait_until

CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [{"schedulerName": "minisched",
                  "plugins": {"multiPoint": {"enabled": [{"name": "Coscheduling"}]}}}],
}


def member(name: str, group: str, cpu: str, **kw: Any) -> dict[str, Any]:
    return make_pod(name, cpu=cpu, labels={POD_GROUP_LABEL: group}, **kw)


def setup(cluster: Cluster, nodes: int = 2, cpu: str = "2") -> None:
    install_pod_group_crd(cluster)
    for i in range(nodes):
        cluster.create(NODES, make_node(f"mini-g{i}", cpu=cpu))


def coscheduling(sched: Scheduler) -> Any:
    return sched.frameworks["minisched"].plugins["Coscheduling"]


def requested_cpu(sched: Scheduler) -> int:
    return int(sched.cache.snapshot().requested("cpu").sum())


def test_coscheduling_sits_at_four_points() -> None:
    fwk = Framework(load_profiles(CONFIG)[0])  # its own SimpleHandle: no pods waiting at Permit
    for point in ("preEnqueue", "postFilter", "reserve", "permit"):
        assert "Coscheduling" in fwk.plugin_names(point), point


def test_the_server_validates_pod_groups(cluster: Cluster) -> None:
    install_pod_group_crd(cluster)
    stored = cluster.create(PODGROUPS, make_pod_group("ok", 3, schedule_timeout_seconds=10))
    assert stored["spec"] == {"minMember": 3, "scheduleTimeoutSeconds": 10}
    bad = make_pod_group("bad", 3)
    bad["spec"]["minMember"] = "three"
    with pytest.raises(Invalid, match="spec.minMember"):
        cluster.create(PODGROUPS, bad)


def test_a_group_that_fits_binds_together(cluster: Cluster) -> None:
    setup(cluster)
    cluster.create(PODGROUPS, make_pod_group("train", 3, schedule_timeout_seconds=20))
    with Scheduler(cluster, config=CONFIG) as sched:
        wait_for_nodes(sched, 2, timeout=30)
        cluster.create(PODS, member("train-0", "train", "1"))
        cluster.create(PODS, member("train-1", "train", "1"))
        # two of three members exist: they wait before the queue, holding nothing
        wait_until(lambda: sched.pending_pods()["gated"] == 2, timeout=30, what="two members gated")
        assert bound_pods(cluster) == {} and requested_cpu(sched) == 0
        cluster.create(PODS, member("train-2", "train", "1"))
        wait_until(lambda: len(bound_pods(cluster)) == 3, timeout=30, what="the group bound")
        # the API server shows a binding before the binding worker counts it
        wait_until(lambda: sched.stats.bound == 3, timeout=30, what="three bindings counted")
        assert coscheduling(sched).phase("default/train") is GroupState.SCHEDULED


def parked_by(sched: Scheduler, keys: list[str]) -> dict[str, frozenset[str]]:
    """The unschedulable ones among `keys`, with the plugins that rejected each."""
    out = {}
    for key in keys:
        qpi = sched.queue.get(key)
        if qpi is not None and sched.queue.where(key) == "unschedulable":
            out[key] = frozenset(qpi.unschedulable_plugins)
    return out


def attempts(sched: Scheduler, keys: list[str]) -> int:
    return sum(qpi.attempts for key in keys if (qpi := sched.queue.get(key)) is not None)


def settle(sched: Scheduler, clock: VirtualClock, keys: list[str]) -> None:
    """Let virtual time pass, a second a step, until every member of `keys` is parked as
    unschedulable and nothing is assumed; then check they stay parked while backoffs (10 s at
    most) and Permit timeouts expire many times over: nothing sends them round again."""
    deadline, began = time.monotonic() + 60, clock.monotonic()
    while not (len(parked_by(sched, keys)) == len(keys) and sched.cache.assumed_count() == 0):
        assert time.monotonic() < deadline, (
            f"not settled after {clock.monotonic() - began:g} virtual s: "
            f"{ {k: sched.queue.where(k) for k in keys} }, {sched.cache.assumed_count()} assumed")
        clock.advance(1)
        time.sleep(0.02)
    assert set(parked_by(sched, keys).values()) == {frozenset({"Coscheduling"})}
    settled = attempts(sched, keys)
    for _ in range(60):
        clock.advance(1)
        time.sleep(0.02)
    sched.wait_for_bindings()
    assert attempts(sched, keys) == settled, "members went round again"
    assert len(parked_by(sched, keys)) == len(keys) and sched.cache.assumed_count() == 0


def test_a_group_that_cannot_fit_binds_none(cluster: Cluster) -> None:
    setup(cluster)  # 2 nodes of 2 cpu: only two 1.5-cpu members fit
    cluster.create(PODGROUPS, make_pod_group("big", 3, schedule_timeout_seconds=20))
    keys = [f"default/big-{i}" for i in range(3)]
    clock = VirtualClock()  # backoffs and the Permit timeout expire when the test says so
    with Scheduler(cluster, config=CONFIG, clock=clock) as sched:
        wait_for_nodes(sched, 2, timeout=30)
        for i in range(3):
            cluster.create(PODS, member(f"big-{i}", "big", "1500m"))
        # The member that fits nowhere rejects the waiting ones at PostFilter: no need to time out
        # (virtual time stands still until settle), a member is parked by Coscheduling at once.
        # The room they give back moves that member (NodeResourcesFit rejected it) to backoffQ, and
        # activeQ being empty it is popped at once (SchedulerPopFromBackoffQ): it fits and waits at
        # Permit for members that do not come, until its wait times out (or the rejected members'
        # Unreserve, run after it reached Permit, rejects it too: Coscheduling's Unreserve rejects
        # every waiting member of the group, as scheduler-plugins'). A member whose attempt saw its
        # siblings arrive (the first may pass PreEnqueue before they leave the gate) backs off when
        # rejected, and is popped and waits at once too. All of them settle parked.
        began = clock.monotonic()

        def rejected_at_post_filter() -> bool:
            parked = parked_by(sched, keys)
            return sched.stats.unschedulable >= 1 and frozenset({"Coscheduling"}) in parked.values()

        wait_until(rejected_at_post_filter, timeout=30, what="the waiting members rejected at PostFilter")
        assert clock.monotonic() == began
        settle(sched, clock, keys)
        assert bound_pods(cluster) == {} and requested_cpu(sched) == 0
        assert coscheduling(sched).phase("default/big") is GroupState.PENDING


def test_a_gang_timing_out_at_permit_settles_unschedulable(cluster: Cluster) -> None:
    """Three members wait at Permit for a fourth that is held back; the wait times out and they are
    rejected together. Each one's freed room is an AssignedPodDelete move, received while the
    others are still in flight: had Coscheduling registered that event (minisched's did, beyond
    scheduler-plugins' Pod Add and PodGroup Add/Update), each would send the others back to
    backoff and round again, to wait and time out forever. They settle."""
    setup(cluster)
    cluster.create(PODGROUPS, make_pod_group("quad", 4, schedule_timeout_seconds=10))
    keys = [f"default/quad-{i}" for i in range(3)]
    clock = VirtualClock()
    with Scheduler(cluster, config=CONFIG, clock=clock) as sched:
        wait_for_nodes(sched, 2, timeout=30)
        held = member("quad-3", "quad", "500m")
        held["spec"]["schedulingGates"] = [{"name": "example.com/not-yet"}]  # counted, but held back
        cluster.create(PODS, held)
        for i in range(3):
            cluster.create(PODS, member(f"quad-{i}", "quad", "500m"))
        wait_until(lambda: len(sched.handle.waiting) == 3, timeout=30, what="three members at Permit")
        # (a member whose attempt saw its siblings arrive, Coscheduling's GROUP_MEMBER_ADD, backs
        # off and waits once more before it settles)
        settle(sched, clock, keys)
        assert bound_pods(cluster) == {} and requested_cpu(sched) == 0


def test_a_group_waiting_at_permit_frees_what_it_held_at_timeout(cluster: Cluster) -> None:
    setup(cluster)
    cluster.create(PODGROUPS, make_pod_group("slow", 3, schedule_timeout_seconds=2))
    with Scheduler(cluster, config=CONFIG) as sched:
        wait_for_nodes(sched, 2, timeout=30)
        cluster.create(PODS, member("slow-0", "slow", "1"))
        cluster.create(PODS, member("slow-1", "slow", "1"))
        late = member("slow-2", "slow", "1")
        late["spec"]["schedulingGates"] = [{"name": "example.com/not-yet"}]  # counted, but held back
        cluster.create(PODS, late)
        wait_until(lambda: len(sched.handle.waiting) == 2, timeout=30, what="two members at Permit")
        assert sched.cache.assumed_count() == 2 and requested_cpu(sched) == 2000
        assert coscheduling(sched).phase("default/slow") is GroupState.GATHERING
        started = time.monotonic()
        wait_until(lambda: sched.cache.assumed_count() == 0, timeout=15, what="the room given back")
        assert time.monotonic() - started > 1.0  # held until the 2 s timeout, not released early
        assert requested_cpu(sched) == 0 and bound_pods(cluster) == {}
        wait_until(lambda: sched.pending_pods()["unschedulable"] == 2, timeout=10, what="members parked")
        assert coscheduling(sched).phase("default/slow") is GroupState.PENDING
