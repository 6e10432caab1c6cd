"""Start-up and rejoin of sharded replicas (issue 14's first real-cluster defect): a replica schedules
nothing until its membership view has settled, so replicas started at once never race each other
for a pod. Embedded cluster, virtual clock: each replica renews when the test says so."""

from __future__ import annotations

import threading

import pytest

from minisched.clock import VirtualClock
from minisched.cluster.embedded import EmbeddedCluster
from minisched.exhibits.sharding_sim import ShardedSim, SimReplica
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS
from minisched.scheduler.pod_info import PodInfo
from minisched.sharding.ring import Ring
from minisched.sharding.shard import Shard
from tests.scheduler.runtime.helpers import wait_until

NAMES = ("sched-a", "sched-b", "sched-c")


def _record_attempts(r: SimReplica) -> list[str]:
    """The pods `r` tried to bind (every attempt reserves on a ledger first, with the fence on)."""
    attempts: list[str] = []
    lock = threading.Lock()
    reserve = r.shard.reserve

    def recording(info: PodInfo, node: str, allocatable: dict[str, int], *, resource_version: str = "") -> bool:
        with lock:
            attempts.append(info.key)
        return reserve(info, node, allocatable, resource_version=resource_version)

    r.shard.reserve = recording  # type: ignore[method-assign]
    return attempts


def _bound(cluster: EmbeddedCluster) -> int:
    return sum(1 for p in cluster.list(PODS)["items"] if p["spec"].get("nodeName"))


def test_replicas_started_at_once_on_a_backlog_attempt_only_the_pods_they_own(
        world: tuple[EmbeddedCluster, VirtualClock]) -> None:
    # The real-cluster start-up that ran 3 replicas at 0.38x one: a backlog waits, the replicas start
    # half a second apart as `minisched run --shards` does (lease written, informers started, then
    # the heartbeat every renew period). The rule: a replica attempts no pod before its settle is
    # over, and by then every peer's heartbeat has seen its lease, so the rings agree: 0 attempts on
    # a pod the final ring gives another replica, 0 pods/binding 409s.
    cluster, clock = world
    for i in range(12):
        cluster.create(NODES, make_node(f"n{i:02d}", cpu="32", memory="128Gi"))
    pods = [f"p{i:03d}" for i in range(240)]
    for name in pods:
        cluster.create(PODS, make_pod(name))
    with ShardedSim(cluster, clock, NAMES) as sim:
        attempts = {name: _record_attempts(sim[name]) for name in NAMES}
        started: list[SimReplica] = []
        for name in NAMES:  # what App._schedule_until does: a first heartbeat, then the informers
            r = sim[name]
            r.shard.tick()
            r.scheduler.start()
            started.append(r)
            clock.advance(0.5)
            for s in started:
                s.shard.tick()
        sim._started = True
        assert all(not r.shard.ring.members for r in started[1:]), "settling replicas own nothing"
        deadline_rounds = 0
        while _bound(cluster) < len(pods):  # time passes: every replica renews each second
            wait_until(lambda: not any(r.scheduler.pending_pods().get("active") for r in started), 60,
                       "the active queues to drain")
            clock.advance(1.0)
            for r in started:
                r.shard.tick()
            deadline_rounds += 1
            assert deadline_rounds < 200, f"only {_bound(cluster)} of {len(pods)} bound"
        ring = Ring(NAMES)
        assert all(r.shard.ring.members == ring.members for r in started)
        not_owned = {name: [k for k in keys if ring.owner_of_pod(*k.split("/")) != name]
                     for name, keys in attempts.items()}
        assert not_owned == dict.fromkeys(NAMES, [])
        assert all(attempts.values()), "every replica scheduled its share"
        assert sum(r.scheduler.stats.bind_conflicts for r in started) == 0
        assert sum(r.scheduler.stats.not_owned for r in started) == 0
        assert sim.bound_twice() == [] and sim.overcommitted() == {}


def test_without_the_settle_the_first_replica_attempts_its_peers_pods(
        world: tuple[EmbeddedCluster, VirtualClock]) -> None:
    # The defect the settle removes: a replica that adopts the first list it reads sees only itself.
    cluster, clock = world
    cluster.create(NODES, make_node("n0", cpu="32", memory="128Gi"))
    for i in range(30):
        cluster.create(PODS, make_pod(f"p{i:03d}"))
    with ShardedSim(cluster, clock, NAMES) as sim:
        a = sim["sched-a"]
        a.shard.join_settle = 0
        attempts = _record_attempts(a)
        a.shard.tick()
        a.scheduler.start()
        sim._started = True
        ring = Ring(NAMES)
        wait_until(lambda: any(ring.owner_of_pod(*k.split("/")) != "sched-a" for k in list(attempts)), 60,
                   "sched-a attempting a pod its peers will own")


def test_a_replica_whose_lease_lapsed_owns_nothing_and_rejoins_after_a_settle(
        world: tuple[EmbeddedCluster, VirtualClock]) -> None:
    cluster, clock = world
    shard = Shard(cluster, identity="sched-a", clock=clock)  # lease 15 s, renew 5 s, settle 7.5 s
    pod = make_pod("p")
    assert shard.join_settle == 7.5
    shard.tick()
    assert not shard.synced() and not shard.ring.members and not shard.owns(pod)
    clock.advance(5)
    shard.tick()
    assert not shard.ring.members  # 5 s < the settle
    clock.advance(2.5)
    shard.tick()
    assert shard.synced() and list(shard.ring.members) == ["sched-a"] and shard.owns(pod)
    clock.advance(15)  # no renewal for a lease duration (paused, or cut off from the API server)
    assert not shard.lease_fresh() and not shard.owns(pod)  # before its heartbeat has run again
    shard.tick()  # renewed: it rejoins, owning nothing until its settle is over
    assert not shard.synced() and not shard.ring.members
    clock.advance(7.5)
    shard.tick()
    assert list(shard.ring.members) == ["sched-a"] and shard.owns(pod)
    assert [members for _, members in shard.history] == [("sched-a",), (), ("sched-a",)]
    with pytest.raises(ValueError, match="join_settle"):
        Shard(cluster, identity="sched-b", clock=clock, join_settle=-1)
