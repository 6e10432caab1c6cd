"""Random sequences of cache operations: the incrementally maintained NodeTable, and every snapshot
taken along the way, equal a table rebuilt from scratch from the state at that moment."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NO_TAINT, NodeTable
from tests.scheduler.plugins.randomcluster import random_node, random_pod

Object = dict[str, Any]


def facts(t: NodeTable) -> dict[str, Any]:
    """Everything plugins read, per node name, independent of row order and vocabulary ids."""
    out = {}
    for row, name in enumerate(t.names):
        labels = {}
        for key in ("zone", "disk", "gen", "team"):
            col = t.label_column(key)
            if col is not None and col[row] >= 0:
                labels[key] = next(v for v in _values(t, key) if t.label_value_id(key, v) == col[row])
        taints = sorted((int(p), t.taints[i]) for i, p in enumerate(t.taint_positions[row]) if p != NO_TAINT)
        ports = sorted((t.ports[i], int(c)) for i, c in enumerate(t.port_counts[row]) if c)
        images = sorted(t.image_list[i] for i in np.flatnonzero(t.image_presence[row]))
        resources = {r: (int(t.allocatable(r)[row]), int(t.requested(r)[row])) for r in t.resource_names}
        out[name] = {
            "labels": labels, "taints": taints, "ports": ports, "images": images,
            "resources": {r: v for r, v in resources.items() if v != (0, 0)},
            "nonzero": (int(t.nonzero_requested("cpu")[row]), int(t.nonzero_requested("memory")[row])),
            "unschedulable": bool(t.unschedulable[row]),
            "pods": sorted(p.key for p in t.pods_on(name)),
        }
    return out


def _values(t: NodeTable, key: str) -> list[str]:
    return list(t._label_values.get(key, []))


def rebuild(nodes: dict[str, Object], pods: dict[str, tuple[str, PodInfo]]) -> NodeTable:
    t = NodeTable()
    for n in nodes.values():
        t.add_node(n)
    for node_name, info in pods.values():
        t.add_pod(node_name, info)
    return t


@pytest.mark.parametrize("seed", range(15))
def test_incremental_equals_rebuilt(seed: int) -> None:
    rng = random.Random(seed)
    table = NodeTable()
    nodes: dict[str, Object] = {}
    pods: dict[str, tuple[str, PodInfo]] = {}
    snapshots: list[tuple[NodeTable, dict[str, Any]]] = []
    for step in range(120):
        op = rng.random()
        if op < 0.2 or not nodes:
            name = f"n{rng.randint(0, 12)}"
            node = random_node(rng, name)
            nodes[name] = node
            table.add_node(node)  # add or update
        elif op < 0.27:
            name = rng.choice(sorted(nodes))
            del nodes[name]
            table.remove_node(name)
        elif op < 0.75:
            info = PodInfo.from_pod(random_pod(rng, f"p{step}"))
            node_name = rng.choice(sorted(nodes))
            pods[info.key] = (node_name, info)
            table.add_pod(node_name, info)
        elif pods:
            key = rng.choice(sorted(pods))
            node_name, _ = pods.pop(key)
            table.remove_pod(node_name, key)
        if rng.random() < 0.3:
            snap = table.snapshot()
            live = {k: v for k, v in pods.items() if v[0] in nodes}
            snapshots.append((snap, facts(rebuild(nodes, live))))
    live = {k: v for k, v in pods.items() if v[0] in nodes}
    assert facts(table) == facts(rebuild(nodes, live))
    for snap, expected in snapshots:  # later writes never leaked into earlier snapshots
        assert facts(snap) == expected
