"""NodePorts (Filter): a pod asking for a host port fits only where no assigned pod holds the same
(protocol, port) on an overlapping host IP (0.0.0.0 overlaps every IP)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework import cluster_event as ce
from minisched.scheduler.framework import signature
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import FilterResult, Handle, PreFilterResult
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import HostPort, PodInfo
from minisched.scheduler.plugins.helpers import assigned_node, parsed_pod
from minisched.scheduler.snapshot import NodeTable

NAME = "NodePorts"
REASON = "node(s) didn't have free ports for the requested pod ports"
WILDCARD = "0.0.0.0"

BoolArray = npt.NDArray[np.bool_]
Object = dict[str, Any]


def conflicts(a: HostPort, b: HostPort) -> bool:
    if a.port != b.port or a.protocol != b.protocol:
        return False
    return a.ip == b.ip or WILDCARD in (a.ip, b.ip)


def fits(pod: PodInfo, node_pods: Sequence[PodInfo]) -> bool:
    """The pure rule for one node, given the pods already on it."""
    used = [hp for p in node_pods for hp in p.host_ports]
    return not any(conflicts(want, have) for want in pod.host_ports for have in used)


class NodePorts:
    name = NAME

    def events_to_register(self) -> list[ce.ClusterEventWithHint]:
        """kube 1.35: an assigned pod deleted (with a hint), a node added (no hint)."""
        return [*ce.events(self.is_schedulable_after_pod_delete, ce.ASSIGNED_POD_DELETE), *ce.events(None, ce.NODE_ADD)]

    def is_schedulable_after_pod_delete(self, pod: Object, old: Object | None, new: Object | None) -> ce.QueueingHint:
        """kube's isSchedulableAfterPodDeleted: only a bound pod whose host ports clash with the
        pod's frees a port it needs."""
        if old is None:
            return ce.QUEUE
        if not assigned_node(old):
            return ce.QUEUE_SKIP
        info, gone = parsed_pod(pod), parsed_pod(old)
        if info is None or gone is None:
            return ce.QUEUE
        clash = any(conflicts(want, have) for want in info.host_ports for have in gone.host_ports)
        return ce.QUEUE if clash else ce.QUEUE_SKIP
    reads_pods = True  # results change with the pods on a node

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[signature.Fragment], Status]:
        return [(signature.HOST_PORTS, signature.host_ports_signer(pod))], Status.success()

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        # a pod without host ports cannot conflict: kube skips the filter for it
        return None, (Status.success() if pod.host_ports else Status.skip(NAME))

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        n = len(nodes)
        if not pod.host_ports:
            return FilterResult.all_pass(n)
        known = nodes.ports
        cols = sorted({
            i for hp in pod.host_ports for i, (ip, proto, port) in enumerate(known)
            if conflicts(hp, HostPort(port, proto, ip))
        })
        if not cols:
            return FilterResult.all_pass(n)
        used = np.asarray((nodes.port_counts[:, cols] > 0).any(axis=1), np.bool_)
        return FilterResult.fail_where(used, REASON, Code.UNSCHEDULABLE)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> NodePorts:
    return NodePorts()
