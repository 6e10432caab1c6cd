from __future__ import annotations

import numpy as np
import pytest

from minisched.objects import make_node, make_pod, taint
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import FrozenSnapshotError, NodeTable


def pod(name: str, cpu: str = "500m", **kw: object) -> PodInfo:
    return PodInfo.from_pod(make_pod(name, cpu=cpu, **kw))  # type: ignore[arg-type]


def test_snapshot_is_unaffected_by_later_changes() -> None:
    t = NodeTable()
    t.add_node(make_node("a", labels={"zone": "x"}))
    t.add_node(make_node("b"))
    snap = t.snapshot()
    t.add_pod("a", pod("p1"))
    t.update_node(make_node("a", labels={"zone": "y"}, taints=[taint("k", "v")]))
    t.add_node(make_node("c", cpu="8"))
    assert snap.requested("cpu").tolist() == [0, 0]
    assert t.requested("cpu").tolist() == [500, 0, 0]
    assert snap.label_value_id("zone", "x") == snap.label_column("zone")[0]
    assert t.label_column("zone")[0] == t.label_value_id("zone", "y")
    assert snap.taint_positions.shape == (2, 0) and t.taint_positions.shape == (3, 1)
    assert list(snap.names) == ["a", "b"] and len(snap) == 2
    assert snap.pods_on("a") == () and [p.name for p in t.pods_on("a")] == ["p1"]
    with pytest.raises(FrozenSnapshotError):
        snap.add_pod("a", pod("p2"))


def test_pods_add_remove_and_counts() -> None:
    t = NodeTable()
    t.add_node(make_node("a"))
    p = pod("p", memory="1Gi", extra_requests={"example.com/gpu": "2"}, host_ports=[80])
    t.add_pod("a", p)
    t.add_pod("a", p)  # idempotent
    assert t.requested("pods").tolist() == [1]
    assert t.requested("example.com/gpu").tolist() == [2]
    assert t.port_counts.tolist() == [[1]]
    assert t.remove_pod("a", p.key) == p
    assert t.remove_pod("a", p.key) is None
    assert t.requested_matrix.tolist() == [[0] * t.requested_matrix.shape[1]]
    assert t.nonzero_requested("cpu").tolist() == [0] and t.port_counts.tolist() == [[0]]


def test_remove_node_keeps_rows_dense_and_pods_wait_for_their_node() -> None:
    t = NodeTable()
    for name in "abcd":
        t.add_node(make_node(name, labels={"n": name}))
    t.add_pod("d", pod("on-d"))
    t.remove_node("b")
    assert sorted(t.names) == ["a", "c", "d"] and len(t) == 3
    for row, name in enumerate(t.names):
        assert t.row(name) == row
        assert t.label_column("n")[row] == t.label_value_id("n", name)
    assert t.requested("cpu")[t.row("d")] == 500
    t.add_pod("ghost", pod("early"))  # the pod's node is not known yet
    t.add_node(make_node("ghost"))
    assert [p.name for p in t.pods_on("ghost")] == ["early"]
    t.remove_node("ghost")
    t.add_node(make_node("ghost"))  # a node that comes back gets its pods back
    assert t.requested("cpu")[t.row("ghost")] == 500


def test_for_node_and_with_pods_are_private_what_ifs() -> None:
    t = NodeTable()
    t.add_node(make_node("a", cpu="2"))
    t.add_node(make_node("b", cpu="2"))
    victim = pod("victim", cpu="1500m")
    t.add_pod("a", victim)
    snap = t.snapshot()
    view = snap.for_node("a", removed=[victim], added=[pod("preemptor", cpu="1")])
    assert list(view.names) == ["a"] and view.requested("cpu").tolist() == [1000]
    assert snap.requested("cpu").tolist() == [1500, 0]
    placed = snap.with_pods([("b", pod("nominated", cpu="2"))])
    assert placed.requested("cpu").tolist() == [1500, 2000] and snap.requested("cpu").tolist() == [1500, 0]
    with pytest.raises(KeyError):
        snap.for_node("zzz")


def test_bad_node_quantity_is_named_and_leaves_the_table_unchanged() -> None:
    t = NodeTable()
    with pytest.raises(ValueError, match=r"node bad: status.allocatable\[cpu\]: quantity 'four'"):
        t.add_node(make_node("bad", cpu="four"))
    assert len(t) == 0


def test_numeric_labels() -> None:
    t = NodeTable()
    for name, gen in [("a", "3"), ("b", "x"), ("c", "-7")]:
        t.add_node(make_node(name, labels={"gen": gen}))
    t.add_node(make_node("d"))
    ints, ok = t.label_numeric("gen")
    assert ok.tolist() == [True, False, True, False]
    assert ints[ok].tolist() == [3, -7]
    assert np.array_equal(t.snapshot().label_numeric("gen")[1], ok)


def test_many_nodes_grow_capacity() -> None:
    t = NodeTable()
    for i in range(300):
        t.add_node(make_node(f"n{i}", cpu=str(i + 1)))
    assert t.allocatable("cpu")[-1] == 300_000 and len(t) == 300


def test_updates_that_change_nothing_scheduling_reads_keep_the_node_version() -> None:
    t = NodeTable()
    t.add_node(make_node("a", labels={"zone": "x"}))
    before = t.node_version
    heartbeat = make_node("a", labels={"zone": "x"}, annotations={"last-seen": "now"})
    t.update_node(heartbeat)
    assert t.node_version == before and t.node("a") is heartbeat
    t.update_node(make_node("a", labels={"zone": "y"}))
    assert t.node_version > before and t.label_column("zone")[0] == t.label_value_id("zone", "y")


def test_with_pods_is_private_even_for_new_ports_and_resources_and_the_table_moves_on() -> None:
    t = NodeTable()
    t.add_node(make_node("a", cpu="4", extra_resources={"example.com/gpu": "2"}))
    t.add_node(make_node("b", cpu="4"))
    snap = t.snapshot()
    ports_before, log_before = list(snap.port_list), snap.pod_version
    placed = snap.with_pods([("a", pod("web", cpu="1", host_ports=[8080])),
                             ("b", pod("gpu", cpu="1", extra_requests={"example.com/gpu": "1"})),
                             ("gone", pod("orphan"))])  # a node not in the snapshot: ignored
    assert placed.requested("cpu").tolist() == [1000, 1000] and placed.requested("example.com/gpu").tolist()[1] == 1
    assert [p.name for p in placed.pods_on("a")] == ["web"] and len(placed.port_list) == len(ports_before) + 1
    assert snap.requested("cpu").tolist() == [0, 0] and not snap.pods_on("a") and snap.port_list == ports_before
    assert snap.pod_version == log_before and snap.nodes_changed_since(snap.node_version, log_before) == []
    t.add_pod("b", pod("later", cpu="2"))  # the live table is not disturbed by the view either
    assert t.requested("cpu").tolist() == [0, 2000] and placed.requested("cpu").tolist() == [1000, 1000]


def test_the_pod_change_log_keeps_to_its_tables_bound() -> None:
    """A table's owner may lower the bound of its pod-change log (SchedulerApp's
    buffers={"pod-change-log": n}); past it, changes older than the log say "cannot tell"."""
    t = NodeTable()
    t.pod_log_limit = 8
    t.add_node(make_node("a"))
    t.add_node(make_node("b"))
    start = t.pod_version
    for i in range(20):
        t.add_pod("ab"[i % 2], pod(f"p{i}"))
        assert len(t._pod_log) <= 8
    assert t.nodes_changed_since(t.node_version, t.pod_version - 2) == ["a", "b"]
    assert t.nodes_changed_since(t.node_version, start) is None  # older than the log reaches
    assert NodeTable().pod_log_limit == 4096
