"""Rendezvous hashing: every replica computes the same owners, the load is even, and a join or a
leave moves only the keys that must move."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from minisched.sharding.ring import Ring, hrw_owner, hrw_score

PODS = [("default", f"pod-{i}") for i in range(6000)]
NODES = [f"node-{i}" for i in range(600)]


def pod_owners(ring: Ring) -> dict[tuple[str, str], str]:
    return {p: ring.owner_of_pod(*p) for p in PODS}


def test_owners_are_the_same_in_another_process() -> None:
    # Python's hash() is salted per process; the ring must not be.
    code = (
        "from minisched.sharding.ring import Ring;"
        "print(','.join(Ring(['a','b','c']).owner_of_pod('default', f'pod-{i}') for i in range(50)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "12345", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}).stdout.strip()
    ring = Ring(["c", "a", "b"])
    assert out.split(",") == [ring.owner_of_pod("default", f"pod-{i}") for i in range(50)]


def test_pods_spread_evenly_over_three_members() -> None:
    counts = Counter(pod_owners(Ring(["sched-a", "sched-b", "sched-c"])).values())
    assert set(counts) == {"sched-a", "sched-b", "sched-c"}
    for member, n in counts.items():
        # 2000 expected; a binomial sd is ~37, so 10% is far outside chance
        assert abs(n - 2000) < 200, (member, counts)


def test_every_node_goes_to_exactly_one_member_and_the_partition_is_balanced() -> None:
    ring = Ring(["sched-a", "sched-b", "sched-c"])
    parts = ring.partition(NODES)
    assigned = [n for nodes in parts.values() for n in nodes]
    assert sorted(assigned) == sorted(NODES)  # each exactly once
    assert sorted(len(nodes) for nodes in parts.values()) == [200, 200, 200]
    # most nodes go to their rendezvous owner; the bound moves only the overflow
    at_owner = sum(ring.owner_of_node(n) == member for member, nodes in parts.items() for n in nodes)
    assert at_owner > 0.8 * len(NODES)
    assert parts == Ring(["sched-c", "sched-a", "sched-b"]).partition(list(reversed(NODES)))  # same everywhere


def test_a_small_cluster_is_partitioned_evenly_too() -> None:
    # The benchmark's 20 nodes: plain rendezvous hashing gave 3 replicas 2, 12 and 6 of them.
    nodes = [f"node-{i:03d}" for i in range(20)]
    ring = Ring(["a", "b", "c"])
    assert sorted(len(p) for p in ring.partition(nodes).values()) == [6, 7, 7]
    assert sorted(len(p) for p in Ring(["a", "b", "c", "d"]).partition(nodes[:3]).values()) == [0, 1, 1, 1]


def test_a_leaving_member_moves_only_its_own_keys() -> None:
    before = pod_owners(Ring(["sched-a", "sched-b", "sched-c"]))
    after = pod_owners(Ring(["sched-a", "sched-c"]))
    moved = {p for p in PODS if before[p] != after[p]}
    assert moved == {p for p in PODS if before[p] == "sched-b"}
    # and b's keys split between the two survivors rather than all landing on one
    heirs = Counter(after[p] for p in moved)
    assert min(heirs.values()) > 0.4 * len(moved)


def test_a_joining_member_takes_about_a_quarter_and_only_for_itself() -> None:
    before = pod_owners(Ring(["sched-a", "sched-b", "sched-c"]))
    after = pod_owners(Ring(["sched-a", "sched-b", "sched-c", "sched-d"]))
    moved = [p for p in PODS if before[p] != after[p]]
    assert all(after[p] == "sched-d" for p in moved)
    assert abs(len(moved) - len(PODS) / 4) < 0.05 * len(PODS)


def test_node_partition_moves_minimally_too() -> None:
    before = Ring(["a", "b", "c"])
    after = Ring(["a", "b", "c", "d"])
    moved = [n for n in NODES if before.owner_of_node(n) != after.owner_of_node(n)]
    assert all(after.owner_of_node(n) == "d" for n in moved)
    assert abs(len(moved) - 150) < 40


def test_scores_separate_member_and_key() -> None:
    assert hrw_score("a", "bc") != hrw_score("ab", "c")
    assert hrw_owner("k", ["x"]) == "x"


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="ring is empty"):
        Ring([]).owner_of_pod("default", "p")
    with pytest.raises(ValueError, match="empty ring"):
        Ring([]).partition(["n1"])
    with pytest.raises(ValueError, match="non-empty identity"):
        Ring(["a", ""])
    with pytest.raises(ValueError, match="namespace and a name"):
        Ring(["a"]).owner_of_pod("", "p")
    assert Ring([]).partition([]) == {}
