"""Sharded replicas keep what one kube-scheduler guarantees (issue 26's sharding parity): a gang is
decided by one replica, and a pod another replica nominated keeps its room in every replica's filters."""

from __future__ import annotations

from typing import Any

from minisched.clock import VirtualClock
from minisched.cluster.embedded import EmbeddedCluster
from minisched.exhibits.sharding_sim import ShardedSim
from minisched.objects import make_node, make_pod, make_priority_class
from minisched.resources import NODES, PODS, PRIORITY_CLASSES
from minisched.scheduler.scheduler import Scheduler
from minisched.sharding.ring import Ring
from minisched.sharding.shard import Shard, owner_of
from minisched.validation.podgroup import POD_GROUP_LABEL, PODGROUPS, install_pod_group_crd, make_pod_group
from tests.scheduler.runtime.helpers import advance_until, wait_until

REPLICAS = ("sched-a", "sched-b", "sched-c")
GANG_CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [{"schedulerName": "minisched",
                  "plugins": {"multiPoint": {"enabled": [{"name": "Coscheduling"}]}}}],
}


def member(name: str, group: str) -> dict[str, Any]:
    return make_pod(name, cpu="1", labels={POD_GROUP_LABEL: group})


def split_names(ring: Ring, count: int) -> list[str]:
    """`count` member names whose own "namespace/name" keys hash to at least two replicas: hashed
    by pod, such a gang would be split."""
    names = [f"train-{i}" for i in range(count)]
    assert len({ring.owner_of_pod("default", n) for n in names}) > 1, "pick names that the pod hash splits"
    return names


def test_the_members_of_a_pod_group_have_one_owner() -> None:
    ring = Ring(REPLICAS)
    names = split_names(ring, 6)
    owners = {owner_of(ring, member(n, "train")) for n in names}
    assert owners == {ring.owner_of_group("default", "train")}
    # a pod without a group is still owned by its own name
    assert owner_of(ring, make_pod("solo")) == ring.owner_of_pod("default", "solo")


def test_a_gang_on_three_replicas_binds_together(world: tuple[EmbeddedCluster, VirtualClock]) -> None:
    cluster, clock = world
    install_pod_group_crd(cluster)
    for i in range(3):
        cluster.create(NODES, make_node(f"n{i}", cpu="4"))
    names = split_names(Ring(REPLICAS), 4)
    cluster.create(PODGROUPS, make_pod_group("train", len(names), schedule_timeout_seconds=30))
    with ShardedSim(cluster, clock, REPLICAS, scheduler_options={"config": GANG_CONFIG}) as sim:
        sim.start()
        for name in names:
            cluster.create(PODS, member(name, "train"))

        def bound() -> int:
            return sum(1 for p in cluster.list(PODS)["items"] if p["spec"].get("nodeName"))

        # split over replicas, each member would wait at Permit for siblings its replica never
        # sees, until the group's timeout rejects them all, again and again
        advance_until(clock, lambda: bound() == len(names), timeout=30, what="the whole gang bound", step=1.0)
        binders = {r.name for r in sim.replicas.values() if r.link.bound}
        assert binders == {Ring(REPLICAS).owner_of_group("default", "train")}
        assert sim.bound_twice() == [] and sim.overcommitted() == {}


def test_another_replicas_nominated_pod_keeps_its_room(world: tuple[EmbeddedCluster, VirtualClock]) -> None:
    """sched-b preempted for its pod `nominee` and nominated it to n1 (status.nominatedNodeName);
    sched-a, which does not own the nominee, must not give that room to a lower-priority pod of
    its own, as one kube-scheduler would not."""
    cluster, clock = world
    cluster.create(NODES, make_node("n1", cpu="4"))
    cluster.create(PRIORITY_CLASSES, make_priority_class("high", 1000))
    ring = Ring(["sched-a", "sched-b"])
    nominee = next(f"nominee-{i}" for i in range(100) if ring.owner_of_pod("default", f"nominee-{i}") == "sched-b")
    mine = next(f"mine-{i}" for i in range(100) if ring.owner_of_pod("default", f"mine-{i}") == "sched-a")
    shards = {name: Shard(cluster, identity=name, clock=clock) for name in ("sched-a", "sched-b")}
    sched_a = Scheduler(cluster, clock=clock, **shards["sched-a"].scheduler_options())
    shards["sched-a"].attach(sched_a)
    for shard in shards.values():
        shard.tick()
    clock.advance(shards["sched-a"].join_settle)
    for shard in shards.values():  # sched-b is alive (its lease renewed) but its loop is not ours to run
        shard.tick()
    assert shards["sched-a"].ring.members == ("sched-a", "sched-b")
    pod = cluster.create(PODS, make_pod(nominee, cpu="3", priority_class_name="high"))
    pod["status"] = {**(pod.get("status") or {}), "nominatedNodeName": "n1"}
    cluster.update(PODS, pod, subresource="status")
    with sched_a:
        wait_until(lambda: sched_a.queue.nominated_node_of(f"default/{nominee}") == "n1", 10,
                   "sched-a to count sched-b's nomination")
        cluster.create(PODS, make_pod(mine, cpu="3"))
        advance_until(clock, lambda: sched_a.stats.unschedulable >= 1 or sched_a.stats.bound >= 1, timeout=10,
                      what=f"sched-a to decide {mine}")
        sched_a.wait_for_bindings()
        assert cluster.get(PODS, mine)["spec"].get("nodeName") is None, "sched-a took the nominee's room"
        # the nominee bound elsewhere (by sched-b): its room is no longer held
        cluster.bind("default", nominee, "n1")
        wait_until(lambda: sched_a.queue.nominated_node_of(f"default/{nominee}") is None, 10,
                   "the nomination gone once the nominee is bound")
    for shard in shards.values():
        shard.stop(release=False)
