"""Ring membership on per-replica Leases, on the embedded cluster and a virtual clock."""

from __future__ import annotations

import pytest

from minisched.clock import VirtualClock, parse_rfc3339
from minisched.cluster.embedded import EmbeddedCluster
from minisched.errors import NotFound
from minisched.resources import LEASES
from minisched.sharding.membership import Membership
from minisched.sharding.ring import Ring


def replicas(cluster: EmbeddedCluster, clock: VirtualClock, *names: str) -> list[Membership]:
    return [Membership(cluster, identity=n, clock=clock, lease_duration=15.0) for n in names]


def test_each_replica_writes_its_own_lease_and_all_see_the_same_members() -> None:
    clock = VirtualClock()
    cluster = EmbeddedCluster(clock=clock)
    a, b, c = replicas(cluster, clock, "sched-a", "sched-b", "sched-c")
    for m in (a, b, c):
        m.renew()
    lease = cluster.get(LEASES, "minisched-shard-sched-b", "kube-system")
    assert lease["spec"]["holderIdentity"] == "sched-b"
    assert lease["spec"]["leaseDurationSeconds"] == 15
    assert parse_rfc3339(lease["spec"]["renewTime"]) == clock.now()
    for m in (a, b, c):
        assert m.member_identities() == ["sched-a", "sched-b", "sched-c"]


def test_renewing_moves_renew_time_and_keeps_acquire_time() -> None:
    clock = VirtualClock()
    cluster = EmbeddedCluster(clock=clock)
    (a,) = replicas(cluster, clock, "sched-a")
    a.renew()
    first = cluster.get(LEASES, a.lease_name, "kube-system")["spec"]
    clock.advance(5)
    a.renew()
    second = cluster.get(LEASES, a.lease_name, "kube-system")["spec"]
    assert second["acquireTime"] == first["acquireTime"]
    assert parse_rfc3339(second["renewTime"]) == parse_rfc3339(first["renewTime"]) + 5


def test_a_replica_that_stops_renewing_leaves_the_ring_after_its_lease_and_comes_back() -> None:
    clock = VirtualClock()
    cluster = EmbeddedCluster(clock=clock)
    a, b, c = replicas(cluster, clock, "sched-a", "sched-b", "sched-c")
    for m in (a, b, c):
        m.renew()
    for m in (a, b, c):
        assert m.member_identities() == ["sched-a", "sched-b", "sched-c"]
    # b pauses; a and c renew every 5 s
    for _ in range(2):
        clock.advance(5)
        a.renew()
        c.renew()
        assert "sched-b" in a.member_identities()  # 10 s < 15 s: still live
    clock.advance(5)
    a.renew()
    c.renew()
    assert a.member_identities() == ["sched-a", "sched-c"]  # 15 s without a change: gone
    assert c.member_identities() == ["sched-a", "sched-c"]
    # a replica that first looks now has not seen b's lease change for 15 s: it gives b one
    # more lease duration (by its own clock) before counting it gone; safe, only slower
    (late,) = replicas(cluster, clock, "sched-late")
    assert "sched-b" in late.member_identities()
    clock.advance(15)
    assert "sched-b" not in late.member_identities()
    a.renew()
    c.renew()
    # b's pods now belong to a and c
    pods = [("default", f"p{i}") for i in range(300)]
    after = Ring(a.member_identities())
    assert {after.owner_of_pod(*p) for p in pods} == {"sched-a", "sched-c"}
    # b resumes and renews: it is back at once
    b.renew()
    assert a.member_identities() == ["sched-a", "sched-b", "sched-c"]


def test_liveness_is_judged_by_the_observer_s_clock_not_by_renew_time() -> None:
    # A writer whose wall clock is an hour behind still counts as live while it keeps renewing.
    clock = VirtualClock()
    cluster = EmbeddedCluster(clock=clock)
    skewed = VirtualClock(start=clock.now() - 3600)
    slow = Membership(cluster, identity="skewed", clock=skewed)
    (observer,) = replicas(cluster, clock, "observer")
    slow.renew()
    observer.renew()
    assert observer.member_identities() == ["observer", "skewed"]
    clock.advance(10)
    skewed.advance(10)
    slow.renew()
    observer.renew()
    clock.advance(10)
    skewed.advance(10)
    assert observer.member_identities() == ["observer", "skewed"]


def test_a_released_lease_leaves_at_once_and_others_leases_are_ignored() -> None:
    clock = VirtualClock()
    cluster = EmbeddedCluster(clock=clock)
    a, b = replicas(cluster, clock, "sched-a", "sched-b")
    a.renew()
    b.renew()
    # a leader-election lease in the same namespace is not a ring member
    cluster.create(LEASES, {"metadata": {"name": "kube-scheduler", "namespace": "kube-system"},
                            "spec": {"holderIdentity": "x", "leaseDurationSeconds": 15}})
    b.release()
    assert a.member_identities() == ["sched-a"]
    b.renew()  # rejoins after a release
    assert a.member_identities() == ["sched-a", "sched-b"]
    cluster.delete(LEASES, b.lease_name, "kube-system")
    assert a.member_identities() == ["sched-a"]


def test_a_stale_cached_version_costs_one_reread() -> None:
    clock = VirtualClock()
    cluster = EmbeddedCluster(clock=clock)
    (a,) = replicas(cluster, clock, "sched-a")
    a.renew()
    # someone (an earlier write of ours that timed out but landed) moved the resourceVersion
    cluster.patch(LEASES, a.lease_name, {"metadata": {"labels": {"touched": "yes"}}}, "kube-system")
    clock.advance(1)
    a.renew()
    spec = cluster.get(LEASES, a.lease_name, "kube-system")["spec"]
    assert parse_rfc3339(spec["renewTime"]) == clock.now()


def test_bad_configuration_is_named() -> None:
    cluster = EmbeddedCluster()
    with pytest.raises(ValueError, match="non-empty identity"):
        Membership(cluster, identity="")
    with pytest.raises(ValueError, match="prefix"):
        Membership(cluster, identity="a", prefix="")
    with pytest.raises(ValueError, match="at least 1 s"):
        Membership(cluster, identity="a", lease_duration=0.5)
    with pytest.raises(NotFound):
        Membership(cluster, identity="a", namespace="missing").renew()
