"""The node-capacity fence: replicas racing to reserve on the same nodes never over-commit one, and
the same race without the resourceVersion precondition does."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from minisched.cluster.base import Cluster, Object
from minisched.cluster.embedded import EmbeddedCluster
from minisched.resources import CONFIG_MAPS, ResourceLike
from minisched.sharding.fence import CapacityLedger, FenceContention, ledger_units

ALLOCATABLE = ledger_units({"cpu": "4", "memory": "8Gi", "pods": "110"})
POD = ledger_units({"cpu": "1", "memory": "1Gi", "pods": "1"})  # four fit on a node, by CPU


class ReadThenWait:
    """A cluster whose ledger reads (get, or the create that made it) each wait at a barrier once per thread: every replica has read
    the same ledger version before any writes, the worst interleaving (a replica paused between
    its read and its write, as by a GC or a slow network)."""

    def __init__(self, cluster: Cluster, parties: int) -> None:
        self._cluster = cluster
        self._barrier = threading.Barrier(parties, timeout=10)
        self._waited = threading.local()

    def get(self, resource: ResourceLike, name: str, namespace: str | None = None) -> Object:
        return self._pause_once(resource, self._cluster.get(resource, name, namespace))

    def create(self, resource: ResourceLike, obj: Object, namespace: str | None = None) -> Object:
        # the replica that creates the ledger reads it from the create's answer
        return self._pause_once(resource, self._cluster.create(resource, obj, namespace))

    def _pause_once(self, resource: ResourceLike, obj: Object) -> Object:
        if resource == CONFIG_MAPS and not getattr(self._waited, "done", False):
            self._waited.done = True
            self._barrier.wait()
        return obj

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)


class Latency:
    """A cluster whose ledger reads come back after 0-2 ms, as over a network: other replicas'
    writes land between a replica's read and its write."""

    def __init__(self, cluster: Cluster, seed: int) -> None:
        self._cluster = cluster
        self._rng = random.Random(seed)

    def get(self, resource: ResourceLike, name: str, namespace: str | None = None) -> Object:
        obj = self._cluster.get(resource, name, namespace)
        time.sleep(self._rng.uniform(0, 0.002))
        return obj

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)


def race(ledger_for: Callable[[int], CapacityLedger], replicas: int, pods_each: int,
         nodes: list[str]) -> list[tuple[str, str]]:
    """Each replica thread tries to reserve its pods on the nodes in order; returns (node, pod) of
    every reservation that answered True."""
    granted: list[tuple[str, str]] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def replica(r: int) -> None:
        ledger = ledger_for(r)
        try:
            for i in range(pods_each):
                pod = f"uid-r{r}-p{i}"
                for node in nodes:
                    if ledger.reserve(node, pod, POD, ALLOCATABLE):
                        with lock:
                            granted.append((node, pod))
                        break
        except BaseException as err:  # surfaced below
            errors.append(err)

    threads = [threading.Thread(target=replica, args=(r,)) for r in range(replicas)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
    return granted


def cpu_on(cluster: Cluster, node: str) -> int:
    return CapacityLedger(cluster).used(node).get("cpu", 0)


def test_replicas_paused_between_read_and_write_never_overcommit_with_the_fence() -> None:
    cluster = EmbeddedCluster()
    shared = ReadThenWait(cluster, parties=6)
    ledgers = [CapacityLedger(shared) for _ in range(6)]
    granted = race(lambda r: ledgers[r], replicas=6, pods_each=1, nodes=["n1"])
    assert len(granted) == 4  # exactly what fits
    assert cpu_on(cluster, "n1") == 4000
    assert sum(ledger.conflicts for ledger in ledgers) >= 5  # all but the first writer had to re-read
    assert sum(ledger.refusals for ledger in ledgers) == 2


def test_the_same_race_without_the_precondition_overcommits() -> None:
    cluster = EmbeddedCluster()
    shared = ReadThenWait(cluster, parties=6)
    granted = race(lambda r: CapacityLedger(shared, fenced=False), replicas=6, pods_each=1,
                   nodes=["n1"])
    # every replica saw an empty node and said yes: six 1-CPU pods granted on 4 CPUs ...
    assert len(granted) == 6
    # ... while the ledger, last write wins, remembers only one of them
    assert cpu_on(cluster, "n1") == 1000


def test_many_replicas_racing_freely_on_a_few_nodes_fill_them_exactly() -> None:
    cluster = EmbeddedCluster()
    nodes = ["n1", "n2", "n3"]
    ledgers = [CapacityLedger(Latency(cluster, seed=r)) for r in range(8)]
    granted = race(lambda r: ledgers[r], replicas=8, pods_each=4, nodes=nodes)
    # 32 pods want 32 CPUs; 12 CPUs exist: 12 granted, no node above its 4
    assert len(granted) == 12
    per_node = {n: sum(1 for node, _ in granted if node == n) for n in nodes}
    assert per_node == {"n1": 4, "n2": 4, "n3": 4}
    for node in nodes:
        assert cpu_on(cluster, node) == 4000
        assert sorted(r.uid for r in CapacityLedger(cluster).reservations(node).values()) == sorted(
            p for n, p in granted if n == node)
    assert sum(ledger.conflicts for ledger in ledgers) > 0  # the race did happen


def test_the_free_race_without_the_precondition_grants_more_than_fits() -> None:
    cluster = EmbeddedCluster()
    nodes = ["n1", "n2", "n3"]
    granted = race(lambda r: CapacityLedger(Latency(cluster, seed=r), fenced=False),
                   replicas=8, pods_each=4, nodes=nodes)
    assert len(granted) > 12  # more 1-CPU pods granted than the 12 CPUs hold


def test_reserve_is_idempotent_and_release_frees_room() -> None:
    cluster = EmbeddedCluster()
    ledger = CapacityLedger(cluster)
    for i in range(4):
        assert ledger.reserve("n1", f"uid-p{i}", POD, ALLOCATABLE)
    assert ledger.reserve("n1", "uid-p0", POD, ALLOCATABLE)  # already there: not counted twice
    assert ledger.used("n1")["cpu"] == 4000
    assert not ledger.reserve("n1", "uid-p4", POD, ALLOCATABLE)
    assert ledger.release("n1", "uid-p2")
    assert not ledger.release("n1", "uid-p2")
    assert not ledger.release("n9", "uid-p2")
    assert ledger.reserve("n1", "uid-p4", POD, ALLOCATABLE)
    assert ledger.used("n1") == {"cpu": 4000, "memory": 4 * 2**30, "pods": 4}


def test_a_resource_the_node_does_not_have_does_not_fit() -> None:
    ledger = CapacityLedger(EmbeddedCluster())
    assert not ledger.reserve("n1", "uid-gpu", {"nvidia.com/gpu": 1}, ALLOCATABLE)
    assert ledger.reserve("n1", "uid-zero", {"nvidia.com/gpu": 0, "cpu": 10}, ALLOCATABLE)


def test_a_ledger_that_keeps_losing_gives_up_with_a_named_error() -> None:
    class AlwaysConflicts:
        def __init__(self, cluster: Cluster) -> None:
            self._cluster = cluster

        def update(self, resource: ResourceLike, obj: Object, **_: Any) -> Object:
            from minisched.errors import Conflict
            raise Conflict("the object has been modified")

        def __getattr__(self, name: str) -> Any:
            return getattr(self._cluster, name)

    ledger = CapacityLedger(AlwaysConflicts(EmbeddedCluster()), max_attempts=3)
    with pytest.raises(FenceContention, match="reserving default/p on node n1: lost the write race 3 times"):
        ledger.reserve("n1", "uid-p", POD, ALLOCATABLE, pod="default/p")
    assert ledger.conflicts == 3


def test_bad_input_is_named() -> None:
    ledger = CapacityLedger(EmbeddedCluster())
    with pytest.raises(ValueError, match=r"pod's UID \(metadata.uid\), got 'default/p'"):
        ledger.reserve("n1", "default/p", POD, ALLOCATABLE)
    with pytest.raises(ValueError, match=r"requests\['cpu'\] must be a non-negative integer"):
        ledger.reserve("n1", "uid-p", {"cpu": -1}, ALLOCATABLE)
    with pytest.raises(ValueError, match=r"allocatable\['cpu'\]"):
        ledger.reserve("n1", "uid-p", POD, {"cpu": "4"})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="node name"):
        ledger.reserve("", "uid-p", POD, ALLOCATABLE)
    with pytest.raises(ValueError, match="at least 1"):
        CapacityLedger(EmbeddedCluster(), max_attempts=0)
    assert ledger_units({"cpu": "250m", "memory": "1Ki"}) == {"cpu": 250, "memory": 1024}


def test_two_holders_of_one_pod_each_hold_and_release_their_own_entry() -> None:
    cluster = EmbeddedCluster()
    a, b = CapacityLedger(cluster, holder="sched-a"), CapacityLedger(cluster, holder="sched-b")
    assert a.reserve("n1", "uid-1", POD, ALLOCATABLE, pod="default/p1")
    assert b.reserve("n1", "uid-1", POD, ALLOCATABLE, pod="default/p1")  # the ring moved: b thinks it owns p1
    assert a.used("n1")["cpu"] == 1000  # one pod, counted once: only one of the two can bind it
    assert a.release("n1", "uid-1")  # a's bind got 409: b bound it, b's entry stays
    entries = list(b.reservations("n1").values())
    assert [(r.uid, r.pod, r.holder) for r in entries] == [("uid-1", "default/p1", "sched-b")]


def test_prune_removes_what_the_caller_calls_stale_under_the_precondition() -> None:
    cluster = EmbeddedCluster()
    ledger = CapacityLedger(cluster, holder="sched-a")
    for i in range(4):
        assert ledger.reserve("n1", f"uid-{i}", POD, ALLOCATABLE, pod=f"default/p{i}")
    assert ledger.prune("n1", lambda r: r.pod in ("default/p1", "default/p3")) == 2
    assert sorted(r.pod for r in ledger.reservations("n1").values()) == ["default/p0", "default/p2"]
    assert ledger.prune("n1", lambda r: False) == 0
    assert ledger.prune("n9", lambda r: True) == 0  # no ledger at all
    assert ledger.pruned == 2


def test_a_holder_name_with_odd_characters_still_makes_a_valid_key() -> None:
    ledger = CapacityLedger(EmbeddedCluster(), holder="host_1:a/b")
    assert ledger.key("uid-1") == "uid-1.host_1-a-b"
    with pytest.raises(ValueError, match="needs a holder"):
        CapacityLedger(EmbeddedCluster(), holder="")


def test_a_pod_two_replicas_hold_counts_once_so_a_full_node_still_takes_its_last_pods() -> None:
    # The bench's "pods left pending that fit": two holders' entries for each of two pending pods
    # filled a 4-CPU node twice over on the ledger while two CPUs held nothing.
    cluster = EmbeddedCluster()
    a, b, c = (CapacityLedger(cluster, holder=h) for h in ("sched-a", "sched-b", "sched-c"))
    for uid in ("uid-1", "uid-2"):
        assert a.reserve("n1", uid, POD, ALLOCATABLE, pod=f"default/{uid}")
        assert b.reserve("n1", uid, POD, ALLOCATABLE, pod=f"default/{uid}")
    assert a.used("n1")["cpu"] == 2000 and a.used("n1")["pods"] == 2
    assert c.reserve("n1", "uid-3", POD, ALLOCATABLE, pod="default/p3")
    assert c.reserve("n1", "uid-4", POD, ALLOCATABLE, pod="default/p4")
    assert not c.reserve("n1", "uid-5", POD, ALLOCATABLE, pod="default/p5")  # now it is full
    assert c.reserve("n1", "uid-1", POD, ALLOCATABLE, pod="default/uid-1")  # a third holder of p1: still one pod
    # a pod's entries that differ (a ring change between two parses) count at the largest
    big = dict(POD, cpu=1500)
    assert CapacityLedger(cluster, holder="sched-d").reserve("n2", "uid-9", big, ALLOCATABLE)
    assert a.reserve("n2", "uid-9", POD, ALLOCATABLE)
    assert a.used("n2")["cpu"] == 1500


def test_one_replicas_own_threads_take_turns_on_a_node_so_they_never_refuse_each_other() -> None:
    # The bench's one replica: 64 binding threads on 20 ledgers, 64% of its PUTs refused with 409
    # by its own other threads. Here two threads of one ledger each pause after reading n1's ledger
    # until the other has read it too (or 2 s went by): without a per-node lock both read the same
    # version and one write is refused; with it the second cannot read before the first wrote.
    cluster = EmbeddedCluster()
    barrier = threading.Barrier(2, timeout=2)

    class PauseAfterRead:
        def get(self, resource: ResourceLike, name: str, namespace: str | None = None) -> Object:
            obj = cluster.get(resource, name, namespace)
            if resource == CONFIG_MAPS:
                with contextlib.suppress(threading.BrokenBarrierError):  # the other is not reading: go on
                    barrier.wait()
            return obj

        def __getattr__(self, name: str) -> Any:
            return getattr(cluster, name)

    assert CapacityLedger(cluster).reserve("n1", "uid-first", POD, ALLOCATABLE)  # the ledger exists
    ledger = CapacityLedger(PauseAfterRead(), holder="sched-a")  # type: ignore[arg-type]
    threads = [threading.Thread(target=ledger.reserve, args=("n1", f"uid-{i}", POD, ALLOCATABLE)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not any(t.is_alive() for t in threads)
    assert ledger.conflicts == 0
    assert cpu_on(cluster, "n1") == 3000
