"""MaxPodsPerNode (Filter): at most `maxPods` pods on a node, counting the pods nominated to it.

A cap below the kubelet's max-pods, for nodes where each pod costs something the node has little
of (a licence per pod, an IP per pod on a small subnet, a blast radius kept small). A node may set
its own cap with the label `minisched.example/max-pods` (an integer).

Beyond Filter, it uses the three capabilities an out-of-tree plugin gets from minisched's typed
contract (minisched.scheduler.framework.interface), with no edit to minisched:

- EnqueueExtensions: a pod it rejected is retried only after an event that can make room, each
  registration with a queueing hint that answers QUEUE or QUEUE_SKIP;
- the Handle's nominator: a pod nominated to a node (preemption made room there for it) holds a
  slot, so a pod of lower priority does not take it meanwhile;
- Closer: with `rejectionLog`, it appends a JSON line to that file each time it finds nodes at
  their cap (preemption's what-ifs included), and the scheduler closes the file through `close()`
  when it stops.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from minisched.meta import key_of
from minisched.scheduler.framework import cluster_event as ce
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import (
    Closer,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    Nominator,
)
from minisched.scheduler.framework.registry import PluginFactory
from minisched.scheduler.framework.types import PODS, PodInfo
from minisched.scheduler.snapshot import NodeTable

NAME = "MaxPodsPerNode"
CAP_LABEL = "minisched.example/max-pods"
AT_CAP = "node(s) had reached their pods-per-node cap"

Object = dict[str, Any]


def node_cap(node: Mapping[str, Any] | None, default: int) -> int:
    """The cap of one node object: its label if that is a non-negative integer, else `default`."""
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    try:
        cap = int(labels.get(CAP_LABEL, default))
    except (TypeError, ValueError):
        return default
    return cap if cap >= 0 else default


def holds_room_against(nominated: Object, pod: PodInfo) -> bool:
    """Does `nominated` keep its slot against `pod`? As kube's addGENominatedPods: a nomination of
    at least the pod's priority, and not the pod's own."""
    priority = int((nominated.get("spec") or {}).get("priority") or 0)
    return priority >= pod.priority and key_of(nominated) != pod.key


class MaxPodsPerNode:
    name = NAME
    # No `reads_pods` (DeclaresPodReads): the verdict also reads the nominator, which the
    # framework's cache of earlier verdicts cannot watch, so it must not reuse them.

    def __init__(self, max_pods: int, handle: Handle | None = None, rejection_log: IO[str] | None = None) -> None:
        self.max_pods = max_pods
        self.handle = handle
        self._log = rejection_log
        self._log_lock = threading.Lock()  # preemption's what-ifs may filter off the scheduling loop

    # --- Filter -----------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        counts = nodes.requested(PODS) + self._nominated_counts(pod, nodes)
        values, labelled = nodes.label_numeric(CAP_LABEL)
        caps = np.where(labelled & (values >= 0), values, self.max_pods)
        full = counts >= caps
        if self._log is not None and full.any():
            self._record(pod, sorted(nodes.names[int(row)] for row in np.flatnonzero(full)))
        return FilterResult.fail_where(full, AT_CAP)

    def _nominated_counts(self, pod: PodInfo, nodes: NodeTable) -> npt.NDArray[np.int64]:
        """Per row, the pods nominated there that hold a slot against `pod` and that the table does
        not already hold (the framework adds some nominated pods itself, in its second pass)."""
        extra = np.zeros(len(nodes), np.int64)
        if self.handle is None:  # built by hand, outside any framework: no nominations to count
            return extra
        nominator: Nominator = self.handle.nominator  # every Handle has one (the scheduler's queue)
        for node_name, waiting in nominator.nominated_pods().items():
            row = nodes.row(node_name)
            if row is None:
                continue
            extra[row] = sum(1 for other in waiting
                             if holds_room_against(other, pod) and not nodes.has_pod(node_name, key_of(other)))
        return extra

    # --- EnqueueExtensions ------------------------------------------------------------------------

    def events_to_register(self) -> list[ce.ClusterEventWithHint]:
        """A pod this plugin rejected may fit after a bound pod left a node, a node came, or a
        node's cap label rose; nothing else frees a slot."""
        return [
            *ce.events(self.is_schedulable_after_pod_delete, ce.ASSIGNED_POD_DELETE),
            *ce.events(self.is_schedulable_after_node_change, ce.NODE_ADD, ce.NODE_LABEL_CHANGE),
        ]

    def is_schedulable_after_pod_delete(self, pod: Object, old: Object | None, new: Object | None) -> ce.QueueingHint:
        """Only a pod that held a slot on a node frees one."""
        if old is None:
            return ce.QUEUE
        return ce.QUEUE if (old.get("spec") or {}).get("nodeName") else ce.QUEUE_SKIP

    def is_schedulable_after_node_change(self, pod: Object, old: Object | None, new: Object | None) -> ce.QueueingHint:
        """A new node with room for any pod, or a node whose cap rose."""
        if new is None:
            return ce.QUEUE
        cap = node_cap(new, self.max_pods)
        if old is None:
            return ce.QUEUE if cap > 0 else ce.QUEUE_SKIP
        return ce.QUEUE if cap > node_cap(old, self.max_pods) else ce.QUEUE_SKIP

    # --- Closer -----------------------------------------------------------------------------------

    def _record(self, pod: PodInfo, full: list[str]) -> None:
        with self._log_lock:
            if self._log is not None and not self._log.closed:
                self._log.write(json.dumps({"pod": pod.key, "nodesAtCap": full}) + "\n")

    def close(self) -> None:
        with self._log_lock:
            if self._log is not None:
                self._log.close()


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> MaxPodsPerNode:
    args = dict(args or {})
    max_pods, log_path = args.get("maxPods"), args.get("rejectionLog")
    if isinstance(max_pods, bool) or not isinstance(max_pods, int) or max_pods < 0:
        raise ValueError(f"{NAME} needs args {{maxPods: <non-negative integer>}}, got {args!r}")
    if log_path is not None and not isinstance(log_path, str):
        raise ValueError(f"{NAME}'s rejectionLog must be a file path, got {log_path!r}")
    log = open(log_path, "a", buffering=1, encoding="utf-8") if log_path else None  # noqa: SIM115
    return MaxPodsPerNode(max_pods, handle, log)


# What Go writes as `var _ framework.FilterPlugin = &MaxPodsPerNode{}`: mypy checks the class against
# each Protocol of minisched's contract it means to implement, and `new` against the registry's type.
_CONTRACT: tuple[type[FilterPlugin], type[EnqueueExtensions], type[Closer]] = (
    MaxPodsPerNode, MaxPodsPerNode, MaxPodsPerNode)
_FACTORY: PluginFactory = new
