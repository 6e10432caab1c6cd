"""Part II §4.3's work split (work_share_run), the hashed partition it is compared with, the
binding log behind the paused-replica timeline, and the chapter's pictures."""

from __future__ import annotations

import hashlib
import math

import pytest
from matplotlib.collections import PathCollection
from matplotlib.patches import Rectangle

from minisched.cluster.embedded import EmbeddedCluster
from minisched.errors import Conflict
from minisched.exhibits.sharding_sim import PausableLink, paused_replica_run, work_share_run
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS
from minisched.sharding import Ring
from minisched.widgets.charts import key_rings, node_partition, replica_share, replica_timeline

NODES20 = [f"node-{i:03d}" for i in range(20)]


def test_hashed_partition_is_the_owner_alone_and_uneven_where_the_bounded_one_is_not():
    ring = Ring(["sched-a", "sched-b", "sched-c"])
    hashed = ring.hashed_partition(NODES20)
    assert all(ring.owner_of_node(n) == m for m, ns in hashed.items() for n in ns)
    assert sorted(n for ns in hashed.values() for n in ns) == NODES20
    sizes = sorted(len(ns) for ns in hashed.values())
    assert sizes[-1] - sizes[0] > 1  # these names hash unevenly (4, 5, 11) ...
    assert max(len(ns) for ns in ring.partition(NODES20).values()) == 7  # ... the cap does not


def test_three_replicas_split_a_backlog_by_the_ring_and_stay_in_their_partitions():
    run = work_share_run(3, nodes=6, node_cpu=16, pods=60)
    ring = Ring(run.replicas)
    owned = [ring.owner_of_pod("default", f"pod-{i:05d}") for i in range(60)]
    assert run.owned == {m: owned.count(m) for m in run.replicas}
    assert run.bound == 60 and sum(run.bound_by.values()) == 60
    assert run.bound_by == run.owned == run.cycles == run.in_partition
    assert not run.bound_twice and not run.overcommitted
    one = work_share_run(1, nodes=6, node_cpu=16, pods=60)
    assert one.cycles == {"sched-a": 60} and one.bound_by == {"sched-a": 60}


def test_work_share_run_refuses_a_backlog_that_cannot_drain():
    with pytest.raises(ValueError, match="do not fit"):
        work_share_run(3, nodes=1, node_cpu=4, pods=5)
    with pytest.raises(ValueError, match="replicas"):
        work_share_run(0)


def test_the_link_logs_each_binding_at_its_clock_time_accepted_or_not():
    from minisched.clock import VirtualClock

    clock = VirtualClock()
    cluster = EmbeddedCluster(clock=clock)
    cluster.create(NODES, make_node("n1"))
    cluster.create(PODS, make_pod("p"))
    link = PausableLink(cluster, clock)
    clock.advance(7)
    link.bind("default", "p", "n1")
    with pytest.raises(Conflict):
        link.bind("default", "p", "n1")
    start = clock.monotonic() - 7
    assert [(t - start, key, ok) for t, key, ok in link.log] == [(7.0, "default/p", True), (7.0, "default/p", False)]
    cluster.close()


def test_the_paused_run_keeps_its_timeline():
    run = paused_replica_run(capacity_fence=False, nodes=3, node_cpu=8, pods=30)
    assert run.lease_expired_at == 15.0 and run.resumed_at > run.lease_expired_at
    paused = [(t, ok) for t, r, ok in run.timeline if r == "sched-c"]
    assert paused and all(t >= run.resumed_at for t, _ in paused)  # nothing went out while paused
    assert sum(ok for _, ok in paused) == run.stale_bound
    others = [t for t, r, ok in run.timeline if r != "sched-c" and ok]
    assert len(others) == run.bound_by["sched-a"] + run.bound_by["sched-b"]


def test_pictures():
    keys = [f"k{i}" for i in range(30)]
    angles = {k: int.from_bytes(hashlib.blake2b(k.encode(), digest_size=8).digest(), "big") / 2**64 * 2 * math.pi
              for k in keys}
    three, two = Ring(["a", "b", "c"]), Ring(["a", "b"])
    before = {k: three.owner_of_pod("d", k) for k in keys}
    after = {k: two.owner_of_pod("d", k) for k in keys}
    fig = key_rings({"3": before, "2": after}, angles)
    moved = sum(before[k] != after[k] for k in keys)
    assert f"2: {moved} moved" in {t.get_text() for t in fig.axes[0].texts}
    assert len([c for c in fig.axes[0].collections if isinstance(c, PathCollection)]) == 2

    fig = node_partition({"hash": three.hashed_partition(NODES20), "bounded": three.partition(NODES20)})
    assert len([p for p in fig.axes[0].patches if isinstance(p, Rectangle)]) == 40
    counts = ", ".join(str(len(ns)) for ns in three.partition(NODES20).values())
    assert f"bounded\n{counts}" in [t.get_text() for t in fig.axes[0].get_yticklabels()]

    fig = replica_share({"1": {"a": 10}, "3": {"a": 3, "b": 4, "c": 3}})
    assert len(fig.axes[0].patches) == 6  # three replicas x two runs, zero-height ones included

    timeline = [(1.0, "a", True), (2.0, "b", True), (30.0, "c", False), (31.0, "c", True)]
    fig = replica_timeline({"run": (timeline, "c", 0.0, 29.0)}, marks={"lease": 15.0})
    shaded = [p for p in fig.axes[0].patches if isinstance(p, Rectangle) and p.get_width() == 29.0]
    assert len(shaded) == 1
    for chart, args in ((key_rings, ({}, {})), (node_partition, ({},)), (replica_share, ({},)), (replica_timeline, ({},))):
        with pytest.raises(ValueError):
            chart(*args)
