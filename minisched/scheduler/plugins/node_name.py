"""NodeName (Filter): a pod that names its node (spec.nodeName) fits only there."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from minisched.scheduler.framework import cluster_event as ce
from minisched.scheduler.framework import signature
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import FilterResult, Handle
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.helpers import node_name
from minisched.scheduler.snapshot import NodeTable

NAME = "NodeName"
REASON = "node(s) didn't match the requested node name"

Object = dict[str, Any]


def fits(pod: PodInfo, node: Object) -> bool:
    """The pure rule for one node."""
    return not pod.node_name or pod.node_name == node_name(node)


class NodeName:
    name = NAME

    def events_to_register(self) -> list[ce.ClusterEventWithHint]:
        """kube 1.35: a node added, no hint (the pod's node may be created after it)."""
        return ce.events(None, ce.NODE_ADD)
    reads_pods = False  # results depend only on the pod and the node objects

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[signature.Fragment], Status]:
        return [(signature.NODE_NAME, pod.node_name)], Status.success()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        n = len(nodes)
        if not pod.node_name:
            return FilterResult.all_pass(n)
        failed = np.ones(n, np.bool_)
        row = nodes.row(pod.node_name)
        if row is not None:
            failed[row] = False
        return FilterResult.fail_where(failed, REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> NodeName:
    return NodeName()
