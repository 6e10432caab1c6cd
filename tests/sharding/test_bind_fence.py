"""The pod's second fence: a binding carries the resourceVersion its reservation names, and a replica
that removes another holder's reservation of a pending pod writes to the pod first (embedded cluster,
virtual clock). Closes the gap the lease check after `reserve` leaves: a holder paused between that
check and its bind."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from minisched.clock import VirtualClock
from minisched.cluster.embedded import EmbeddedCluster
from minisched.exhibits.sharding_sim import paused_before_bind_run
from minisched.objects import make_node, make_pod
from minisched.resources import NODES, PODS
from minisched.scheduler.pod_info import PodInfo
from minisched.scheduler.scheduler import Scheduler
from minisched.sharding.fence import CapacityLedger, ledger_units
from minisched.sharding.shard import REVOKED_ANNOTATION, Shard
from tests.scheduler.runtime.helpers import wait_until


def test_a_holder_paused_between_its_lease_check_and_its_bind_gets_409_and_nothing_is_overcommitted() -> None:
    run = paused_before_bind_run(bind_fence=True)
    assert run.filled_by_peer == "bind-fence-n1"  # the peer removed the holder's entry and filled n1 ...
    assert run.pruned >= 1 and run.revocations >= 1  # ... after writing to p
    # the holder's late binding carried p's version from before that write
    assert "Precondition failed: ResourceVersion in precondition" in run.holder_answer
    # that one, and maybe a second: p's retry after the holder rejoins, rejected once and popped at
    # once from backoffQ (SchedulerPopFromBackoffQ), can decide on p's version from before the
    # holder's own FailedScheduling status write, and binds with it (the chapter's "a legitimate
    # write to a pod between decision and bind")
    assert run.bind_stale_versions in (1, 2)
    assert run.overcommitted == {}
    assert run.p_binds == 1 and run.p_node == "bind-fence-n2"  # scheduled again, bound once


def test_without_the_bind_fence_the_paused_holders_binding_overcommits_the_node() -> None:
    run = paused_before_bind_run(bind_fence=False)
    assert run.filled_by_peer == "bind-fence-n1" and run.pruned >= 1
    assert run.holder_answer == "bound" and run.p_node == "bind-fence-n1"
    assert run.overcommitted == {"bind-fence-n1": {"cpu": (6000, 4000)}}  # p and q: 3 CPUs each on 4


def _alone(cluster: EmbeddedCluster, clock: VirtualClock, identity: str = "sched-a") -> tuple[Shard, Scheduler]:
    shard = Shard(cluster, identity=identity, clock=clock, join_settle=0)
    sched = Scheduler(cluster, clock=clock, **shard.scheduler_options())
    shard.attach(sched)
    shard.tick()
    return shard, sched


def test_a_revocation_that_finds_the_pod_bound_keeps_the_entry(world: tuple[EmbeddedCluster, VirtualClock]) -> None:
    # The holder's binding landed before the revocation (the remover's informer still shows the pod
    # pending): the answer to the write shows it bound, and the room stays held.
    cluster, clock = world
    cluster.create(NODES, make_node("n1", cpu="4"))
    pod = cluster.create(PODS, make_pod("p", cpu="3", scheduler_name="nobody"))
    uid, rv = pod["metadata"]["uid"], pod["metadata"]["resourceVersion"]
    gone = CapacityLedger(cluster, holder="sched-gone")  # not in the ring: no lease
    assert gone.reserve("n1", uid, ledger_units({"cpu": "3"}), ledger_units({"cpu": "4"}), pod="default/p",
                        resource_version=rv)
    cluster.bind("default", "p", "n1", uid=uid, resource_version=rv)  # its binding lands
    shard, sched = _alone(cluster, clock)
    entries = CapacityLedger(cluster).reservations("n1")
    assert shard._stale("n1", entries, {uid: pod}) == set()  # judged on the pending copy: kept
    assert shard.revocations == 1 and shard.revoked_bound == 1
    assert "sched-gone on n1 at resourceVersion " + rv in \
        cluster.get(PODS, "p", "default")["metadata"]["annotations"][REVOKED_ANNOTATION]


def test_a_revoked_entry_is_pruned_and_its_holders_binding_is_refused(world: tuple[EmbeddedCluster, VirtualClock]) -> None:
    cluster, clock = world
    cluster.create(NODES, make_node("n1", cpu="4"))
    pod = cluster.create(PODS, make_pod("p", cpu="3", scheduler_name="nobody"))
    uid, rv = pod["metadata"]["uid"], pod["metadata"]["resourceVersion"]
    gone = CapacityLedger(cluster, holder="sched-gone")
    assert gone.reserve("n1", uid, ledger_units({"cpu": "3"}), ledger_units({"cpu": "4"}), pod="default/p",
                        resource_version=rv)
    shard, sched = _alone(cluster, clock)
    sched.start()
    try:
        wait_until(lambda: sched.cache.pod_node("default/p") is None and sched._pod_informer is not None
                   and sched._pod_informer.store.get_by_key("default/p") is not None, 60, "p in the informer")
        assert shard.cleanup() == 1 and shard.revocations == 1 and shard.revoked_bound == 0
        assert CapacityLedger(cluster).reservations("n1") == {}
        with pytest.raises(Exception, match="Precondition failed: ResourceVersion in precondition: " + rv):
            cluster.bind("default", "p", "n1", uid=uid, resource_version=rv)  # the holder, resumed
        assert not cluster.get(PODS, "p", "default")["spec"].get("nodeName")
    finally:
        sched.stop(5.0)
        shard.stop(1.0)


def test_an_entry_rewritten_for_a_newer_version_is_not_removed_by_a_revocation_of_the_old_one(
        world: tuple[EmbeddedCluster, VirtualClock]) -> None:
    # The remover is paused between its revocation and its prune; the holder rejoins meanwhile,
    # decides the pod again (now at the revoked version) and reserves: its entry is rewritten to
    # name the new version, so the late prune (of the entry as revoked) leaves it.
    cluster, clock = world
    shard, _ = _alone(cluster, clock)
    ledger = CapacityLedger(cluster, holder="sched-b")
    units, alloc = ledger_units({"cpu": "3"}), ledger_units({"cpu": "4"})
    assert ledger.reserve("n1", "uid-p", units, alloc, pod="default/p", resource_version="5")
    [old] = ledger.reservations("n1").values()
    assert old.resource_version == "5"
    assert ledger.reserve("n1", "uid-p", units, alloc, pod="default/p", resource_version="5")  # same: a no-op
    assert ledger.reserve("n1", "uid-p", units, alloc, pod="default/p", resource_version="9")
    [new] = ledger.reservations("n1").values()
    assert new.resource_version == "9" and ledger.used("n1") == {"cpu": 3000}
    assert ledger.prune("n1", shard._still_stale({("uid-p", "sched-b", "5")})) == 0
    assert ledger.prune("n1", shard._still_stale({("uid-p", "sched-b", "9")})) == 1


def test_a_pod_updated_between_decision_and_bind_is_retried_and_counted(
        world: tuple[EmbeddedCluster, VirtualClock]) -> None:
    # A legitimate write to the pod (a label) after the cycle decided: the binding carries the older
    # version and gets 409; the pod goes back to the queue and binds at the next attempt.
    cluster, clock = world
    cluster.create(NODES, make_node("n1", cpu="4"))
    shard, sched = _alone(cluster, clock)
    touched = threading.Event()
    reserve = shard.reserve

    def touch_after_reserving(info: PodInfo, node: str, allocatable: Any, *, resource_version: str = "") -> bool:
        reserved = reserve(info, node, allocatable, resource_version=resource_version)
        if not touched.is_set():
            touched.set()
            rv = cluster.patch(PODS, info.name, {"metadata": {"labels": {"team": "blue"}}},
                               info.namespace)["metadata"]["resourceVersion"]
            # the update reaches the informer while the pod is assumed (the queue skips it, as kube's does)
            store = sched._pod_informer.store if sched._pod_informer is not None else None
            wait_until(lambda: store is not None and store.get_by_key(info.key)["metadata"]["resourceVersion"] == rv,
                       60, "the informer to see the update")
            time.sleep(0.05)  # and its handler to have run
        return reserved

    shard.reserve = touch_after_reserving  # type: ignore[method-assign]
    sched.start()
    try:
        cluster.create(PODS, make_pod("p", cpu="3"))
        deadline = time.monotonic() + 60
        while not cluster.get(PODS, "p", "default")["spec"].get("nodeName"):
            assert time.monotonic() < deadline, f"p never bound: {sched.pending_pods()}"
            clock.advance(1.0)  # the retry's backoff
            shard.tick()  # and the lease renewed as time passes
            sched.wait_for_bindings(1.0)
            time.sleep(0.02)  # the queue's flusher moves it (a thread of its own)
        assert sched.stats.bind_stale_versions == 1 and sched.stats.bind_conflicts == 1
        assert shard.stats().bind_stale_versions == 1
        assert sched.stats.bound == 1
        pod = cluster.get(PODS, "p", "default")
        [entry] = CapacityLedger(cluster).reservations("n1").values()
        assert entry.uid == pod["metadata"]["uid"]  # one entry, for the version that bound
    finally:
        sched.stop(5.0)
        shard.stop(1.0)
