"""Fake nodes for KWOK: Node objects that KWOK adopts (by annotation) and keeps Ready."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
# The label key the workbook puts on every node a chapter creates (value: the chapter's id). KWOK keeps
# nodes with this key alive on kind (`make cluster-up`) and on the kind-like test control plane.
CHAPTER_NODE_LABEL = "minisched.dev/chapter"
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


def node_is_ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def create_fake_nodes(
    cluster: Any,
    count: int,
    *,
    prefix: str = "kwok-node",
    wait_ready: float | None = 120.0,
    parallelism: int = 16,
    **node_options: Any,
) -> list[str]:
    """Create `count` fake nodes named <prefix>-0.. (options as for fake_node), concurrently, and
    wait until KWOK reports them all Ready (unless wait_ready is None). Returns their names."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    names = [f"{prefix}-{i}" for i in range(count)]
    with ThreadPoolExecutor(max(1, parallelism)) as pool:
        list(pool.map(lambda name: cluster.create("nodes", fake_node(name, **node_options)), names))
    if wait_ready is None:
        return names
    wanted = set(names)
    deadline = time.monotonic() + wait_ready
    while True:
        ready = {n["metadata"]["name"] for n in cluster.list("nodes")["items"] if node_is_ready(n)}
        missing = wanted - ready
        if not missing:
            return names
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{len(missing)} of {count} fake nodes not Ready after {wait_ready:.0f}s (is KWOK running?)"
            )
        time.sleep(0.2)
