"""NodeUnschedulable (Filter): nodes with spec.unschedulable (cordoned) take only pods that tolerate
the node.kubernetes.io/unschedulable:NoSchedule taint."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from minisched.scheduler.framework import cluster_event as ce
from minisched.scheduler.framework import signature
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import FilterResult, Handle
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.helpers import parsed_pod
from minisched.scheduler.snapshot import NodeTable

NAME = "NodeUnschedulable"
REASON = "node(s) were unschedulable"
TAINT_KEY = "node.kubernetes.io/unschedulable"

Object = dict[str, Any]


def tolerates_unschedulable(pod: PodInfo) -> bool:
    return any(t.tolerates(TAINT_KEY, "", "NoSchedule") for t in pod.tolerations)


def fits(pod: PodInfo, node: Object) -> bool:
    """The pure rule for one node."""
    return not (node.get("spec") or {}).get("unschedulable") or tolerates_unschedulable(pod)


class NodeUnschedulable:
    name = NAME

    def events_to_register(self) -> list[ce.ClusterEventWithHint]:
        """kube 1.35: a node added or its taints (spec.unschedulable among them) changed, with a hint."""
        return ce.events(self.is_schedulable_after_node_change, ce.NODE_ADD, ce.NODE_TAINT_CHANGE)

    def is_schedulable_after_node_change(self, pod: Object, old: Object | None, new: Object | None) -> ce.QueueingHint:
        """kube's: queue when the node now takes the pod (schedulable, or tolerated) and did not
        before (or is new)."""
        if new is None:
            return ce.QUEUE
        info = parsed_pod(pod)
        if info is None:
            return ce.QUEUE
        if not fits(info, new):
            return ce.QUEUE_SKIP
        return ce.QUEUE if old is None or not fits(info, old) else ce.QUEUE_SKIP
    reads_pods = False  # results depend only on the pod and the node objects

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[signature.Fragment], Status]:
        return [(signature.TOLERATIONS, signature.tolerations_signer(pod))], Status.success()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        if tolerates_unschedulable(pod):
            return FilterResult.all_pass(len(nodes))
        # a copy: the result (kept by decision records) must not alias the table's live column
        return FilterResult.fail_where(nodes.unschedulable.copy(), REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> NodeUnschedulable:
    return NodeUnschedulable()
