"""The NodeTable's pod index counts label-selector matches per node as a loop over pods would,
through adds, removals, node removal (rows move), snapshots (copy-on-write) and what-if views."""

from __future__ import annotations

import random

import numpy as np
import pytest

from minisched.objects import make_node, make_pod
from minisched.scheduler import pod_index
from minisched.scheduler.framework.types import LabelSelector, PodInfo, Requirement
from minisched.scheduler.snapshot import NodeTable

SELECTORS = [
    LabelSelector(()),
    LabelSelector((Requirement("app", "In", ("web",)),)),
    LabelSelector((Requirement("app", "NotIn", ("web", "db")),)),
    LabelSelector((Requirement("tier", "Exists"),)),
    LabelSelector((Requirement("tier", "DoesNotExist"), Requirement("app", "In", ("db", "nope")))),
    LabelSelector((Requirement("unknown", "In", ("x",)),)),
    LabelSelector((Requirement("unknown", "DoesNotExist"),)),
]


def looped(t: NodeTable, selector: LabelSelector, namespace: str) -> list[int]:
    return t.count_pods(lambda p: p.namespace == namespace and not p.terminating
                        and selector.matches(dict(p.labels))).tolist()


@pytest.mark.parametrize("seed", range(15))
def test_index_counts_equal_the_loop(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pod_index, "COMPACT_MIN", 4 if seed % 2 else 1024)  # compact often on odd seeds
    rng = random.Random(seed)
    t = NodeTable()
    names = [f"n{i}" for i in range(6)]
    for n in names:
        t.add_node(make_node(n))
    placed: dict[str, str] = {}
    snaps = []
    for step in range(120):
        action = rng.random()
        if action < 0.6:
            labels = {k: rng.choice(["web", "db", "x"]) for k in ("app", "tier") if rng.random() < 0.7}
            pod = make_pod(f"p{step}", labels=labels, namespace=rng.choice(["default", "other"]))
            if rng.random() < 0.1:
                pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            node = rng.choice(names)
            t.add_pod(node, PodInfo.from_pod(pod))
            placed[f"{pod['metadata']['namespace']}/p{step}"] = node
        elif action < 0.85 and placed:
            key = rng.choice(sorted(placed))
            t.remove_pod(placed.pop(key), key)
        elif action < 0.92:
            gone = rng.choice(names)
            t.remove_node(gone)  # the last row moves into the hole; its pods wait as orphans
            t.add_node(make_node(gone))  # and come back with the node
        else:
            snaps.append((t.snapshot(), [(s, ns, looped(t, s, ns)) for s in SELECTORS for ns in ("default", "other")]))
        for s in SELECTORS:
            for ns in ("default", "other", "absent"):
                assert t.count_matching(s, ns).tolist() == looped(t, s, ns), (seed, step)
    for snap, expected in snaps:  # snapshots keep their own counts while the table moves on
        for s, ns, counts in expected:
            assert snap.count_matching(s, ns).tolist() == counts


def test_what_if_views_do_not_touch_the_table() -> None:
    t = NodeTable()
    for n in ("a", "b"):
        t.add_node(make_node(n))
    t.add_pod("a", PodInfo.from_pod(make_pod("w", labels={"app": "web"})))
    snap = t.snapshot()
    web = SELECTORS[1]
    view = snap.with_pods([("b", PodInfo.from_pod(make_pod("v", labels={"app": "web", "new": "key"})))])
    assert view.count_matching(web, "default").tolist() == [1, 1]
    assert snap.count_matching(web, "default").tolist() == [1, 0]
    t.add_pod("b", PodInfo.from_pod(make_pod("z", labels={"app": "web"})))
    assert t.count_matching(web, "default").tolist() == [1, 1] and snap.count_matching(web, "default").tolist() == [1, 0]
    one = snap.for_node("a", removed=list(snap.pods_on("a")))  # a subset view counts by loop
    assert one.pod_index is None and one.count_matching(web, "default").tolist() == [0]
    assert np.array_equal(snap.count_matching(web, "default"), [1, 0])


@pytest.mark.parametrize("seed", range(10))
def test_counts_kept_from_snapshots_move_with_the_table(seed: int) -> None:
    """Counts a snapshot computes are handed back to the table (if it has not changed since), then
    moved by every add and remove: later snapshots must still read what a loop would count."""
    rng = random.Random(seed)
    t = NodeTable()
    names = [f"n{i}" for i in range(5)]
    for n in names:
        t.add_node(make_node(n))
    placed: dict[str, str] = {}
    for step in range(150):
        if rng.random() < 0.65 or not placed:
            labels = {"app": rng.choice(["web", "db"])} if rng.random() < 0.8 else {}
            pod = make_pod(f"p{step}", labels=labels, namespace=rng.choice(["default", "other"]))
            if rng.random() < 0.1:
                pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            node = rng.choice(names)
            t.add_pod(node, PodInfo.from_pod(pod))
            placed[f"{pod['metadata']['namespace']}/p{step}"] = node
        elif rng.random() < 0.9:
            key = rng.choice(sorted(placed))
            t.remove_pod(placed.pop(key), key)
        else:
            gone = rng.choice(names)
            t.remove_node(gone)
            t.add_node(make_node(gone))
        snap = t.snapshot()
        for s in SELECTORS[:3]:
            assert snap.count_matching(s, "default").tolist() == looped(snap, s, "default"), (seed, step)
    assert t.pod_index is not None
    assert t.pod_index._kept or t.pod_index._handback, "snapshots hand their counts back to the table"


def test_a_snapshot_keeps_its_pods_while_the_table_assumes_more_without_copying() -> None:
    table = NodeTable()
    for i in range(3):
        table.add_node(make_node(f"n{i}", cpu="8", memory="8Gi", pods="50"))
    for i in range(4):
        table.add_pod(f"n{i % 3}", PodInfo.from_pod(make_pod(f"old{i}", labels={"app": "a"})))
    live = table.indexed_pods()
    snap = table.snapshot()
    seen = snap.indexed_pods()
    rows_before = seen.node_rows.copy()
    shared = live.node_row
    table.add_pod("n2", PodInfo.from_pod(make_pod("new0", labels={"app": "b"})))
    assert live.node_row is shared  # appended in place: no slot a snapshot reads was written
    table.add_pod("n1", PodInfo.from_pod(make_pod("new1", labels={"app": "a"})))
    assert np.array_equal(seen.node_rows, rows_before) and len(seen) == 4
    table.remove_pod("n0", "default/old0")  # rewrites a slot the snapshot reads: copied first
    assert live.node_row is not shared
    assert np.array_equal(seen.node_rows, rows_before) and len(seen) == 4
    assert len(table.indexed_pods()) == 5
