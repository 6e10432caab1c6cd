"""Lab 11, the instructor's solution."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from minisched.cluster.base import Cluster
from minisched.errors import NotFound
from minisched.resources import NAMESPACES
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import FilterResult, Handle
from minisched.scheduler.framework.status import Code
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.snapshot import NodeTable

NAME = "NamespaceNodeSelector"
ANNOTATION = "scheduler.alpha.kubernetes.io/node-selector"


def parse_selector(text: str) -> dict[str, str] | None:
    """"env=prod, tier=web" -> {"env": "prod", "tier": "web"}; None when it does not parse."""
    pairs: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            return None
        pairs[key.strip()] = value.strip()
    return pairs


class NamespaceNodeSelector:
    name = NAME

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def _selector_text(self, namespace: str) -> str:
        try:
            obj = self.cluster.get(NAMESPACES, namespace)
        except NotFound:
            return ""
        return str((obj.get("metadata", {}).get("annotations") or {}).get(ANNOTATION, "")).strip()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        n = len(nodes)
        text = self._selector_text(pod.namespace)
        if not text:
            return FilterResult.all_pass(n)
        pairs = parse_selector(text)
        if pairs is None:
            return FilterResult(np.zeros(n, np.bool_), np.ones(n, np.uint8),
                                (f"namespace {pod.namespace} has a malformed node selector: {text}",),
                                Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        passed = np.ones(n, np.bool_)
        for key, value in pairs.items():
            column, wanted = nodes.label_column(key), nodes.label_value_id(key, value)
            if column is None or wanted is None:
                passed[:] = False
            else:
                passed &= column == wanted
        if passed.all():
            return FilterResult.all_pass(n)
        return FilterResult(passed, (~passed).astype(np.uint8),
                            (f"node(s) didn't match the node selector of namespace {pod.namespace}",),
                            Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> NamespaceNodeSelector:
    cluster = getattr(handle, "cluster", None)
    if cluster is None:
        raise ValueError(f"{NAME} needs the scheduler's handle with a cluster to read Namespaces from")
    return NamespaceNodeSelector(cluster)
