"""The pod index as InterPodAffinity reads it (live-slot mask, selector and namespace masks, the
affinity term entries) stays consistent with the NodeTable's pods through adds, removals, node
removal (rows move), compaction, and copy-on-write snapshots and views."""

from __future__ import annotations

import random

import numpy as np
import pytest

from minisched.objects import make_node, make_pod
from minisched.scheduler import pod_index
from minisched.scheduler.framework.types import LabelSelector, PodInfo, Requirement
from minisched.scheduler.pod_index import REQUIRED_ANTI_AFFINITY, PodIndex
from minisched.scheduler.snapshot import NodeTable


def anti_affinity(app: str) -> dict:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}]}}


def info(name: str, app: str, namespace: str = "default", anti: bool = False) -> PodInfo:
    return PodInfo.from_pod(make_pod(name, namespace=namespace, labels={"app": app},
                                     affinity=anti_affinity(app) if anti else None))


def per_node(table: NodeTable, app: str) -> dict[str, int]:
    """Live pods labelled app=<app> per node name, from the columns."""
    pc = table.indexed_pods()
    mask = pc.selector_mask(LabelSelector((Requirement("app", "In", (app,)),))) & pc.alive
    counts = np.bincount(pc.node_rows[mask], minlength=len(table))
    return {name: int(counts[row]) for row, name in enumerate(table.names) if counts[row]}


def anti_terms_per_node(table: NodeTable) -> dict[str, list[str]]:
    """Per node name, the apps named by live pods' required anti-affinity terms, from the entries."""
    pc = table.indexed_pods()
    slot, tid, kind, _ = pc.term_entries()
    live = (kind == REQUIRED_ANTI_AFFINITY) & pc.alive[slot]
    out: dict[str, list[str]] = {}
    for s, t in zip(slot[live], tid[live], strict=True):
        term = pc.terms[int(t)]
        assert term.selector is not None
        out.setdefault(table.names[int(pc.node_rows[s])], []).append(term.selector.requirements[0].values[0])
    return {n: sorted(v) for n, v in out.items()}


def expected_anti_terms(table: NodeTable) -> dict[str, list[str]]:
    out = {}
    for name in table.names:
        apps = sorted(t.selector.requirements[0].values[0] for p in table.pods_on(name) if p.pod_affinity
                      for t in p.pod_affinity.required_anti_affinity if t.selector is not None)
        if apps:
            out[name] = apps
    return out


def expected(table: NodeTable, app: str) -> dict[str, int]:
    out = {}
    for name in table.names:
        n = sum(1 for p in table.pods_on(name) if dict(p.labels).get("app") == app)
        if n:
            out[name] = n
    return out


def test_snapshots_keep_their_pods_while_the_table_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pod_index, "COMPACT_MIN", 16)  # compact often, so it is exercised
    rng = random.Random(7)
    adds = 0
    table = NodeTable()
    for i in range(6):
        table.add_node(make_node(f"n{i}"))
    placed: list[tuple[str, PodInfo]] = []
    snapshots: list[tuple[NodeTable, dict[str, dict[str, int]], dict[str, list[str]]]] = []
    views: list[tuple[NodeTable, dict[str, int], dict[str, list[str]]]] = []
    for step in range(600):
        roll = rng.random()
        if roll < 0.55 or not placed:
            node = rng.choice(list(table.names))
            p = info(f"p{step}", rng.choice(["a", "b", "c"]), rng.choice(["default", "other"]), rng.random() < 0.4)
            table.add_pod(node, p)
            placed.append((node, p))
            adds += 1
        elif roll < 0.95:
            node, p = placed.pop(rng.randrange(len(placed)))
            table.remove_pod(node, p)
        elif len(table) > 2:  # a node goes (its pods become orphans), another comes back
            gone = rng.choice(list(table.names))
            table.remove_node(gone)
            placed = [(n, p) for n, p in placed if n != gone]
            table.add_node(make_node(f"new{step}"))
        if step % 25 == 0:
            snap = table.snapshot()
            snapshots.append((snap, {app: expected(snap, app) for app in "abc"}, expected_anti_terms(snap)))
            # a view writes privately (its new term too)
            view = snap.with_pods([(snap.names[0], info(f"nominated{step}", "a", anti=True))])
            assert per_node(view, "a") == expected(view, "a")
            assert anti_terms_per_node(view) == expected_anti_terms(view)
            views.append((view, expected(view, "a"), expected_anti_terms(view)))
        for app in "abc":
            assert per_node(table, app) == expected(table, app), step
        assert anti_terms_per_node(table) == expected_anti_terms(table), step
    for snap, counts, terms in snapshots:  # every snapshot still sees exactly the pods it was taken with
        for app in "abc":
            assert per_node(snap, app) == counts[app]
        assert anti_terms_per_node(snap) == terms
    for view, count, terms in views:  # and so does every what-if view, with its extra pod
        assert per_node(view, "a") == count
        assert anti_terms_per_node(view) == terms
    assert table.indexed_pods().slots < adds  # dead slots were compacted away


def test_namespace_mask_and_terms() -> None:
    pc = PodIndex()
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone"}]}}
    p1 = PodInfo.from_pod(make_pod("x", namespace="ns1", labels={"app": "a"}, affinity=anti))
    p2 = PodInfo.from_pod(make_pod("y", namespace="ns2", labels={"app": "a"}, affinity=anti))
    pc.add(p1, 0)
    pc.add(p2, 1)
    assert pc.namespace_mask(["ns2"]).tolist() == [False, True]
    slot, tid, kind, _ = pc.term_entries()
    assert slot.tolist() == [0, 1] and len(pc.terms) == 2  # same term text, different owner namespace
    pc.remove(p1.key)
    assert pc.alive.tolist() == [False, True]
