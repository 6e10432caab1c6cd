"""Fake nodes for KWOK: Node objects that KWOK adopts (by annotation) and keeps Ready."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}


def fake_node(
    name: str,
    *,
    cpu: str = "32",
    memory: str = "256Gi",
    pods: str = "110",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    kwok_taint: bool = False,
) -> dict[str, Any]:
    """A Node that KWOK manages: it sets the Ready condition and heartbeats, and runs pods bound to it.

    `kwok_taint=True` adds KWOK's conventional kwok.x-k8s.io/node=fake:NoSchedule taint, which keeps
    ordinary pods off fake nodes in a shared cluster (pods then need a matching toleration)."""
    all_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok"}
    all_labels.update(labels or {})
    resources = {"cpu": cpu, "memory": memory, "pods": pods}
    node_taints = [dict(t) for t in taints] + ([dict(KWOK_TAINT)] if kwok_taint else [])
    spec: dict[str, Any] = {}
    if node_taints:
        spec["taints"] = node_taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": all_labels,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": spec,
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }
