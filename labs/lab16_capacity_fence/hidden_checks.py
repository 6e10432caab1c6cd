"""Lab 16 hidden checks: graded after submission, left out of student copies."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from labs.borrowed import describe, holds, tripwires
from labs.harness import Check, call_within, in_threads
from labs.lab16_capacity_fence.checks import ALLOCATABLE, NS, POD, PREFIX, Between, cpu_on, ledger, on_server
from minisched.cluster.base import Cluster, Object
from minisched.cluster.embedded import EmbeddedCluster
from minisched.errors import Conflict
from minisched.resources import CONFIG_MAPS, ResourceLike
from minisched.sharding import fence
from minisched.sharding.fence import ledger_units

LAB = "lab16_capacity_fence"


class ReadThenWait(Between):
    """Every replica thread waits at a barrier after its first ledger read: all of them have read
    the same version before any writes (the worst interleaving)."""

    def __init__(self, cluster: Cluster, parties: int) -> None:
        super().__init__(cluster, max_writes=100 * parties)
        self._barrier = threading.Barrier(parties, timeout=30)
        self._waited = threading.local()

    def _after_read(self, resource: ResourceLike, obj: Object) -> Object:
        if resource == CONFIG_MAPS and not getattr(self._waited, "done", False):
            self._waited.done = True
            self._barrier.wait()
        return obj


class AlwaysConflicts:
    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster

    def update(self, resource: ResourceLike, obj: Object, **kwargs: Any) -> Object:
        raise Conflict(f"the object has been modified ({obj['metadata']['name']})")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)


def race(module: Any, cluster: Any, replicas: int, pods_each: int, nodes: list[str],
         switch_interval: float | None = None) -> tuple[list[tuple[str, str]], list[Any]]:
    """Each replica reserves its 1-CPU pods on the first node with room; (node, entry key) granted."""
    granted: list[tuple[str, str]] = []
    lock = threading.Lock()
    ledgers = [ledger(module, cluster, f"r{r}") for r in range(replicas)]

    def replica(r: int) -> None:
        for i in range(pods_each):
            for node in nodes:
                if ledgers[r].reserve(node, f"uid-{r}-{i}", POD, ALLOCATABLE, pod=f"default/r{r}-p{i}"):
                    with lock:
                        granted.append((node, f"uid-{r}-{i}.r{r}"))
                    break

    in_threads(replica, replicas, switch_interval=switch_interval)
    return granted, ledgers


def check_many_replicas(module: Any) -> None:
    nodes = ["n1", "n2", "n3"]
    for name, replicas, pods_each, wrap, switch in (
        ("8 replicas that all read before any writes", 8, 3, lambda c: ReadThenWait(c, 8), None),
        ("6 replicas switching threads every 10 µs", 6, 4, lambda c: c, 1e-5),
    ):
        cluster = EmbeddedCluster()
        granted, ledgers = race(module, wrap(cluster), replicas, pods_each, nodes, switch)
        held = {(n, k) for n in nodes for k in on_server(cluster, n)}
        cpu = {n: cpu_on(cluster, n) for n in nodes}
        assert sorted(granted) == sorted(held), (
            f"{name}: every reservation that answered True must be on the server and nothing else; "
            f"granted but missing: {sorted(set(granted) - held)[:4]}, on the server but not granted: "
            f"{sorted(held - set(granted))[:4]}")
        assert len(granted) == 12 and all(v == 4000 for v in cpu.values()), (
            f"{name}, {replicas * pods_each} 1-CPU pods for 3 nodes of 4 CPUs: expected 12 granted and every "
            f"node at 4000m; got {len(granted)} granted, {cpu}")
        refusals = sum(x.refusals for x in ledgers)
        expected = 4 * 1 + 4 * 2 + 3 * (replicas * pods_each - 12)
        assert refusals == expected, (
            f"{name}: the pods placed on n2 were refused by n1 first, those on n3 by n1 and n2, and the "
            f"{replicas * pods_each - 12} that fit nowhere by all three: expected {expected} refusals counted "
            f"(one per refused call, whatever 409s came before), got {refusals}")
        if switch is None:
            assert sum(x.conflicts for x in ledgers) >= replicas - 1, (
                f"{name}: all read n1's empty ledger, one write can win: expected at least {replicas - 1} "
                f"conflicts counted, got {sum(x.conflicts for x in ledgers)}")


def check_units(module: Any) -> None:
    cluster = EmbeddedCluster()
    a = ledger(module, cluster)
    half = ledger_units({"cpu": "1500m", "memory": "2Gi"})
    answers = [a.reserve("n1", f"cpu-{i}", half, ALLOCATABLE) for i in range(3)]
    assert answers == [True, True, False], (
        f"1500m pods on a node of 4 CPUs (4000 millicores): two fit (3000m), a third would make 4500m; "
        f"expected [True, True, False], got {answers}")
    mem = ledger_units({"memory": "1Gi"})
    answers = [a.reserve("n1", f"mem-{i}", mem, ALLOCATABLE) for i in range(5)]
    assert answers == [True, True, True, True, False], (
        f"4Gi of 8Gi taken, then 1Gi pods ({mem['memory']} bytes): four more fill it exactly; expected "
        f"[True, True, True, True, False], got {answers}")
    gpu = a.reserve("n1", "gpu", {"nvidia.com/gpu": 1}, ALLOCATABLE)
    zero = a.reserve("n1", "zero", {"nvidia.com/gpu": 0, "pods": 1}, ALLOCATABLE)
    assert (gpu, zero) == (False, True), (
        "a resource the node does not list is 0 allocatable: requesting 1 GPU should be False, requesting 0 of "
        f"it True; got {gpu!r}, {zero!r}")
    assert a.used("n1") == {"cpu": 3000, "memory": 8 * 2**30, "nvidia.com/gpu": 0, "pods": 1}, (
        f"used(): got {a.used('n1')}")


def check_two_holders(module: Any) -> None:
    cluster = EmbeddedCluster()
    a, b = ledger(module, cluster, "replica-a"), ledger(module, cluster, "replica-b")
    big = ledger_units({"cpu": "2"})
    answers = [a.reserve("n1", "uid-x", big, ALLOCATABLE), b.reserve("n1", "uid-x", big, ALLOCATABLE),
               b.reserve("n1", "uid-y", big, ALLOCATABLE)]
    assert answers == [True, True, False], (
        "A and B both think they own pod uid-x (a ring change): each holds its own 2-CPU entry, and both count, "
        f"so B's uid-y does not fit; expected [True, True, False], got {answers}")
    assert a.release("n1", "uid-x") is True and sorted(on_server(cluster, "n1")) == ["uid-x.replica-b"], (
        f"A's release of uid-x must leave B's entry: got {sorted(on_server(cluster, 'n1'))}")


def within(seconds: float, fn: Callable[[], Any], what: str) -> Any:
    """fn() on a daemon thread: its answer, its exception, or a failed check when it has not
    returned after `seconds` (a retry loop with no end would hang the whole run)."""
    return call_within(seconds, what, fn, advice="does the retry loop stop after max_attempts tries?")


def check_contention(module: Any) -> None:
    a = ledger(module, AlwaysConflicts(EmbeddedCluster()), max_attempts=5)
    try:
        within(20, lambda: a.reserve("n7", "uid-a", POD, ALLOCATABLE, pod="default/a"),
               "reserve() with every write answered 409")
    except module.FenceContention as e:
        assert "n7" in str(e) and "default/a" in str(e), f"the FenceContention should name the node and the pod: {e}"
    else:
        raise AssertionError("every write answered 409: after max_attempts tries reserve() should raise FenceContention")
    assert a.conflicts == 5, f"max_attempts=5, every write a 409: expected conflicts 5, got {a.conflicts}"
    cluster = EmbeddedCluster()
    a = ledger(module, cluster)
    a.reserve("n1", "uid-a", POD, ALLOCATABLE)
    assert ledger(module, AlwaysConflicts(cluster), max_attempts=3).release("n1", "uid-z") is False, (
        "release of an entry that is not there should answer False without writing")
    assert cluster.get(CONFIG_MAPS, PREFIX + "n1", NS)["data"], "the ledger lost its entry"
    stuck = ledger(module, AlwaysConflicts(cluster), max_attempts=4)
    try:
        within(20, lambda: stuck.release("n1", "uid-a"), "release() with every write answered 409")
    except module.FenceContention as e:
        assert "n1" in str(e), f"the FenceContention should name the node: {e}"
    else:
        raise AssertionError("release() of a held entry, every write a 409: after max_attempts tries it should "
                             "raise FenceContention")
    assert stuck.conflicts == 4, f"max_attempts=4, every write a 409: expected conflicts 4, got {stuck.conflicts}"


def check_fills_an_empty_node(module: Any) -> None:
    cluster = EmbeddedCluster()
    a = ledger(module, cluster)
    whole = dict(ALLOCATABLE)
    assert a.reserve("n9", "uid-all", whole, ALLOCATABLE, pod="default/all") is True, (
        f"one pod asking exactly the node's allocatable {whole} on an empty ledger fits: reserve() should answer True")
    assert a.reserve("n9", "uid-one-more", {"pods": 1}, ALLOCATABLE) is False, "the node is full: then refuse"
    assert a.used("n9") == whole, f"used(): expected {whole}, got {a.used('n9')}"


# what minisched already has that is this lab's answer: the submission must not use it
BORROWABLE: list[object] = [fence.CapacityLedger, fence.held, getattr(fence, "_sum", fence.held)]


def check_written_not_delegated(module: Any) -> None:
    names = holds(module, BORROWABLE)
    assert not names, (f"{', '.join(names)} in your exercise is minisched's own ledger "
                       f"({', '.join(describe(getattr(module, n)) for n in names)}): write reserve and release yourself")
    with tripwires(LAB, module, BORROWABLE) as (again, touched):
        problem = ""
        try:
            cluster = EmbeddedCluster()
            a = ledger(again, cluster)
            answers = [a.reserve("n1", f"uid-{i}", POD, ALLOCATABLE, pod=f"default/p{i}") for i in range(5)]
            a.release("n1", "uid-0")
        except Exception as e:  # noqa: BLE001 (a tripwire, or what the submission does without the library)
            problem = f"{type(e).__name__}: {e}"
    assert not touched, (f"your Ledger works by calling minisched's own ledger ({touched[0]}): that is the answer "
                         f"borrowed, not written; write the read-check-write loop yourself")
    assert not problem and answers[:4] == [True] * 4, (
        f"with minisched's CapacityLedger out of reach, your Ledger stopped working ({problem or answers})")


CHECKS = [
    Check("many replicas at once never over-commit", check_many_replicas,
          "every reservation must be decided on a ledger read in the same try as the write that records it."),
    Check("millicores, bytes, and resources the node lacks", check_units,
          "compare used + request with allocatable.get(resource, 0), for every resource the pod asks a non-zero amount of."),
    Check("two holders of one pod each hold, and release, their own", check_two_holders,
          "the entry key is self.key(uid): it includes the holder."),
    Check("endless 409s end in FenceContention", check_contention,
          "give up after self.max_attempts tries, in reserve and in release: raise FenceContention naming the node."),
    Check("one pod can fill an empty node exactly", check_fills_an_empty_node,
          "a resource nobody has reserved yet is used 0 (used.get(resource, 0)); only going over allocatable refuses."),
    Check("the ledger is written, not delegated to minisched's CapacityLedger", check_written_not_delegated,
          "minisched.sharding.fence.CapacityLedger is the chapter's answer: the lab is writing it; use only "
          "LedgerBase's read, entries, key and entry."),
]
