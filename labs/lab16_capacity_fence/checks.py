"""Lab 16 checks (public).

    python -m labs.lab16_capacity_fence.checks [exercise|solution|path/to/exercise.py]

The other replicas here are the checks' own code, writing the ledger format of README.md straight
to the cluster, at the moment a check chooses: between your read and your write.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from labs.harness import Check, main
from minisched.cluster.base import Cluster, Object
from minisched.cluster.embedded import EmbeddedCluster
from minisched.errors import NotFound
from minisched.resources import CONFIG_MAPS, ResourceLike
from minisched.sharding.fence import ledger_units

LAB = "lab16_capacity_fence"
NS, PREFIX = "kube-system", "lab16-capacity-"
ALLOCATABLE = ledger_units({"cpu": "4", "memory": "8Gi", "pods": "110"})
POD = ledger_units({"cpu": "1", "memory": "1Gi", "pods": "1"})  # four fit on a node, by CPU
BIG = ledger_units({"cpu": "3", "memory": "1Gi", "pods": "1"})  # one fits
MAX_WRITES = 50  # more writes than that for one call: a retry loop that never re-reads


class Between:
    """The cluster as your replica sees it. After your replica's k-th read of a ledger (a get, or
    the create that made it) the k-th of `moves` runs: another replica's write lands between your
    read and your write, as when your replica is paused there (a GC, a slow network)."""

    def __init__(self, cluster: Cluster, *moves: Callable[[], None], max_writes: int = MAX_WRITES) -> None:
        self._cluster = cluster
        self._moves = list(moves)
        self.max_writes = max_writes
        self.reads = self.writes = 0

    def get(self, resource: ResourceLike, name: str, namespace: str | None = None) -> Object:
        return self._after_read(resource, self._cluster.get(resource, name, namespace))

    def create(self, resource: ResourceLike, obj: Object, namespace: str | None = None) -> Object:
        return self._after_read(resource, self._cluster.create(resource, obj, namespace))

    def update(self, resource: ResourceLike, obj: Object, **kwargs: Any) -> Object:
        self.writes += 1
        if self.writes > self.max_writes:
            raise AssertionError(f"your replica wrote the ledger more than {self.max_writes} times in this check: "
                                 "after a 409, read the ledger again before deciding and writing")
        return self._cluster.update(resource, obj, **kwargs)

    def _after_read(self, resource: ResourceLike, obj: Object) -> Object:
        if resource == CONFIG_MAPS:
            self.reads += 1
            if self._moves:
                self._moves.pop(0)()
        return obj

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)


def on_server(cluster: Cluster, node: str) -> dict[str, dict[str, Any]]:
    """The node's ledger entries as the server has them: entry key -> the stored JSON."""
    try:
        ledger = cluster.get(CONFIG_MAPS, PREFIX + node, NS)
    except NotFound:
        return {}
    return {k: json.loads(v) for k, v in (ledger.get("data") or {}).items()}


def cpu_on(cluster: Cluster, node: str) -> int:
    return sum(e["requests"].get("cpu", 0) for e in on_server(cluster, node).values())


def other_replica(cluster: Cluster, holder: str, node: str, uid: str, requests: dict[str, int],
                  release: bool = False) -> Callable[[], None]:
    """A move: replica `holder` adds (or drops) its entry for `uid` on `node`'s ledger, by a
    read-modify-write of its own under the precondition."""
    def move() -> None:
        ledger = cluster.get(CONFIG_MAPS, PREFIX + node, NS)
        data = dict(ledger.get("data") or {})
        key = f"{uid}.{holder}"
        if release:
            data.pop(key, None)
        else:
            data[key] = json.dumps({"uid": uid, "pod": f"default/{uid}", "holder": holder, "requests": requests})
        cluster.update(CONFIG_MAPS, {**ledger, "data": data})
    return move


def create_ledger(cluster: Cluster, node: str) -> None:
    cluster.create(CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap", "data": {},
                                 "metadata": {"name": PREFIX + node, "namespace": NS}}, NS)


def ledger(module: Any, cluster: Any, holder: str = "replica-a", **options: Any) -> Any:
    return module.new(cluster, holder, namespace=NS, prefix=PREFIX, **options)


def check_one_replica(module: Any) -> None:
    cluster = EmbeddedCluster()
    a = ledger(module, cluster)
    answers = [a.reserve("n1", f"uid-{i}", POD, ALLOCATABLE, pod=f"default/p{i}") for i in range(5)]
    assert answers == [True, True, True, True, False], (
        f"five 1-CPU pods on a 4-CPU node: expected reserve() to answer [True, True, True, True, False] "
        f"(the fourth fills the node exactly), got {answers}")
    entries = on_server(cluster, "n1")
    expected = {f"uid-{i}.replica-a" for i in range(4)}
    assert set(entries) == expected, (
        f"the ledger ConfigMap {NS}/{PREFIX}n1 on the server should hold {sorted(expected)}, holds {sorted(entries)}")
    first = entries["uid-0.replica-a"]
    want = {"uid": "uid-0", "pod": "default/p0", "holder": "replica-a", "requests": POD}
    assert first == want, f"entry uid-0.replica-a: expected {want}, the server has {first}"
    assert (a.refusals, a.conflicts) == (1, 0), (
        f"one reservation refused, no 409: expected refusals 1, conflicts 0; got {a.refusals}, {a.conflicts}")
    again = a.reserve("n1", "uid-0", POD, ALLOCATABLE, pod="default/p0")
    assert again is True and cpu_on(cluster, "n1") == 4000, (
        f"reserving uid-0 again (already held): expected True and still 4000m on the node, "
        f"got {again!r} and {cpu_on(cluster, 'n1')}m")
    assert a.release("n1", "uid-0") is True, "release of a held reservation should answer True"
    assert a.reserve("n1", "uid-4", POD, ALLOCATABLE, pod="default/p4") is True, (
        "after releasing uid-0, uid-4 fits: reserve() should answer True")
    assert a.used("n1") == {"cpu": 4000, "memory": 4 * 2**30, "pods": 4}, f"used(): got {a.used('n1')}"


def check_interleaved(module: Any) -> None:
    # B reserves 3 CPUs between A's read (of the empty ledger it creates) and A's write of its own 3 CPUs
    cluster = EmbeddedCluster()
    a = ledger(module, Between(cluster, other_replica(cluster, "replica-b", "n1", "uid-b", BIG)))
    got = a.reserve("n1", "uid-a", BIG, ALLOCATABLE, pod="default/a")
    held = sorted(on_server(cluster, "n1"))
    assert got is False and held == ["uid-b.replica-b"], (
        "a 4-CPU node; replica B reserved 3 CPUs after your replica read the ledger and before it wrote its own "
        f"3 CPUs: expected reserve() False and only B's entry on the server, got {got!r} and {held} "
        f"({cpu_on(cluster, 'n1')}m reserved)")
    assert (a.conflicts, a.refusals) == (1, 1), (
        "that took one 409 (your write, at the version you read) and one refusal (after re-reading): expected "
        f"conflicts 1, refusals 1; got {a.conflicts}, {a.refusals}")
    # the same race with room for both: A's retry must succeed, next to B's entry
    cluster = EmbeddedCluster()
    create_ledger(cluster, "n1")
    a = ledger(module, Between(cluster, other_replica(cluster, "replica-b", "n1", "uid-b", POD)))
    got = a.reserve("n1", "uid-a", POD, ALLOCATABLE, pod="default/a")
    held = sorted(on_server(cluster, "n1"))
    assert got is True and held == ["uid-a.replica-a", "uid-b.replica-b"], (
        "a 4-CPU node; B reserved 1 CPU between your read and your write of 1 CPU: both fit, so expected True "
        f"and both entries on the server; got {got!r} and {held}")
    assert (a.conflicts, a.refusals) == (1, 0), f"expected conflicts 1, refusals 0; got {a.conflicts}, {a.refusals}"


def check_409_retried(module: Any) -> None:
    cluster = EmbeddedCluster()
    create_ledger(cluster, "n1")
    between = Between(cluster, other_replica(cluster, "replica-b", "n1", "uid-b", POD),
                      other_replica(cluster, "replica-c", "n1", "uid-c", POD))
    a = ledger(module, between)
    got = a.reserve("n1", "uid-a", POD, ALLOCATABLE, pod="default/a")
    held = sorted(on_server(cluster, "n1"))
    assert got is True and held == ["uid-a.replica-a", "uid-b.replica-b", "uid-c.replica-c"], (
        "B wrote between your first read and write, C between your second: expected True after a third try and "
        f"the three entries on the server; got {got!r} and {held}")
    assert (a.conflicts, between.writes) == (2, 3), (
        "two 409s, then success: expected 2 conflicts counted and 3 writes; got "
        f"conflicts {a.conflicts}, {between.writes} writes")
    again = a.reserve("n1", "uid-a", POD, ALLOCATABLE, pod="default/a")
    assert again is True and cpu_on(cluster, "n1") == 3000 and a.conflicts == 2, (
        "reserving uid-a again: expected True, 3000m still reserved and no new conflict; got "
        f"{again!r}, {cpu_on(cluster, 'n1')}m, conflicts {a.conflicts}")


def check_release(module: Any) -> None:
    cluster = EmbeddedCluster()
    a = ledger(module, cluster)
    assert a.release("n9", "uid-a") is False, "release on a node with no ledger: expected False"
    assert on_server(cluster, "n9") == {} and not cluster.list(CONFIG_MAPS, NS)["items"], (
        "release on a node with no ledger should not create one")
    assert a.reserve("n1", "uid-a", POD, ALLOCATABLE) is True
    answers = [a.release("n1", "uid-a"), a.release("n1", "uid-a")]
    assert answers == [True, False] and on_server(cluster, "n1") == {}, (
        f"releasing twice: expected [True, False] and an empty ledger, got {answers} and {sorted(on_server(cluster, 'n1'))}")
    # B holds the same pod (a ring change) and reserves another between your read and write
    a.reserve("n1", "uid-x", POD, ALLOCATABLE)
    other_replica(cluster, "replica-b", "n1", "uid-x", POD)()
    a = ledger(module, Between(cluster, other_replica(cluster, "replica-b", "n1", "uid-y", POD)))
    got = a.release("n1", "uid-x")
    held = sorted(on_server(cluster, "n1"))
    assert got is True and held == ["uid-x.replica-b", "uid-y.replica-b"], (
        "B holds uid-x too and reserved uid-y between your read and your write: releasing your uid-x should "
        f"answer True and leave both of B's entries; got {got!r} and {held}")
    assert a.conflicts == 1, f"that release met one 409: expected conflicts 1, got {a.conflicts}"


def check_bad_input(module: Any) -> None:
    cluster = EmbeddedCluster()
    a = ledger(module, cluster)
    cases: list[tuple[str, dict[str, Any], dict[str, Any], tuple[str, ...]]] = [
        ("a quantity string", {"cpu": "500m"}, ALLOCATABLE, ("requests['cpu']", "500m", "ledger_units")),
        ("a negative request", {"memory": -1}, ALLOCATABLE, ("requests['memory']", "-1")),
        ("a float", {"cpu": 0.5}, ALLOCATABLE, ("requests['cpu']", "0.5")),
        ("True for 1", {"pods": True}, ALLOCATABLE, ("requests['pods']", "True")),
        ("a quantity in allocatable", POD, {**ALLOCATABLE, "memory": "8Gi"}, ("allocatable['memory']", "8Gi")),
    ]
    for what, requests, allocatable, words in cases:
        try:
            a.reserve("n1", "uid-a", requests, allocatable)
        except ValueError as e:
            missing = [w for w in words if w not in str(e)]
            assert not missing, f"{what}: the ValueError should name {list(words)}; {missing} missing from {str(e)!r}"
        else:
            raise AssertionError(f"{what} ({requests} / {allocatable}): expected a ValueError, reserve() returned")
    items = cluster.list(CONFIG_MAPS, NS)["items"]
    assert not items, (
        "bad input must be refused before anything is written: a ledger was created "
        f"({[i['metadata']['name'] for i in items]})")


CHECKS = [
    Check("one replica: reserves what fits, refuses the rest", check_one_replica,
          "read the ledger (self.read(node)), sum its entries (total(...)), refuse if any resource would go over "
          "allocatable (equal is fine), else add self.entry(...) under self.key(uid) and update.", points=2),
    Check("two replicas interleaved never over-commit", check_interleaved,
          "write back the object you read, resourceVersion and all: the server answers 409 Conflict if anyone "
          "wrote since; catch minisched.errors.Conflict, count it, and go round again from the read.", points=2),
    Check("a 409 is retried from a fresh read, counted once", check_409_retried,
          "each try starts with self.read(node); a pod already in the ledger under your key is True, not a second entry."),
    Check("release is idempotent and fenced too", check_release,
          "release reads with create=False, drops only self.key(uid), writes under the precondition, retries on 409; "
          "nothing to drop is False."),
    Check("bad input is refused by name, before any write", check_bad_input,
          "check requests and allocatable first: non-negative int, not bool; a str means ledger_units was forgotten."),
]

if __name__ == "__main__":
    sys.exit(main(LAB, sys.argv[1:]))
