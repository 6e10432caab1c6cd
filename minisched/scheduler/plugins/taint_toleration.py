"""TaintToleration (Filter, Score): a node's NoSchedule/NoExecute taints keep out pods that do not
tolerate them; untolerated PreferNoSchedule taints lower a node's score.

Vectorised as: which of the snapshot's distinct taints does this pod tolerate (a loop over distinct
taints, not nodes), then one lookup in the [node, taint] presence matrix. The reason names no taint:
since 1.35 kube-scheduler says "node(s) had untolerated taint(s)" (before, "node(s) had untolerated
taint {key: value}" with the node's first untolerated taint), so a FailedScheduling event shows no
taint's key or value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework import cluster_event as ce
from minisched.scheduler.framework import signature
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import FilterResult, Handle
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import PodInfo, Toleration
from minisched.scheduler.plugins.helpers import default_normalize_score, node_taints, parsed_pod, take
from minisched.scheduler.snapshot import NO_TAINT, NodeTable

NAME = "TaintToleration"

Object = dict[str, Any]
Taint = tuple[str, str, str]
IntArray = npt.NDArray[np.int64]

_FILTER_EFFECTS = ("NoSchedule", "NoExecute")
# kube 1.35's Filter (tainttoleration/taint_toleration.go); its ErrReasonNotMatch constant, "node(s)
# had taints that the pod didn't tolerate", is no Filter's reason
REASON = "node(s) had untolerated taint(s)"


def tolerated(tolerations: Sequence[Toleration], taint: Taint) -> bool:
    return any(t.tolerates(*taint) for t in tolerations)


def prefer_no_schedule_tolerations(pod: PodInfo) -> tuple[Toleration, ...]:
    """Only tolerations with effect PreferNoSchedule or empty count for scoring (as in kube)."""
    return tuple(t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule"))


def untolerated_taint(pod: PodInfo, node: Object) -> Taint | None:
    """The pure filter rule: the first NoSchedule/NoExecute taint of the node the pod does not
    tolerate, or None when the pod fits."""
    for t in node_taints(node):
        if t[2] in _FILTER_EFFECTS and not tolerated(pod.tolerations, t):
            return t
    return None


def intolerable_prefer_no_schedule(pod: PodInfo, node: Object) -> int:
    """The pure raw score: how many PreferNoSchedule taints the pod does not tolerate."""
    tols = prefer_no_schedule_tolerations(pod)
    return sum(1 for t in node_taints(node) if t[2] == "PreferNoSchedule" and not tolerated(tols, t))


class TaintToleration:
    name = NAME

    def events_to_register(self) -> list[ce.ClusterEventWithHint]:
        """kube 1.35: a node added or its taints changed, with a hint. (kube also registers the
        pod's own toleration change; here a pending pod's own update is the queue's business.)"""
        return ce.events(self.is_schedulable_after_node_change, ce.NODE_ADD, ce.NODE_TAINT_CHANGE)

    def is_schedulable_after_node_change(self, pod: Object, old: Object | None, new: Object | None) -> ce.QueueingHint:
        """kube's: queue when the node now has no taint the pod does not tolerate and had one before
        (or is new)."""
        info = parsed_pod(pod)
        if info is None or new is None:
            return ce.QUEUE
        if untolerated_taint(info, new) is not None:
            return ce.QUEUE_SKIP
        return ce.QUEUE if old is None or untolerated_taint(info, old) is not None else ce.QUEUE_SKIP
    reads_pods = False  # results depend only on the pod and the node objects

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[signature.Fragment], Status]:
        return [(signature.TOLERATIONS, signature.tolerations_signer(pod))], Status.success()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        n = len(nodes)
        cols = [i for i, t in enumerate(nodes.taints) if t[2] in _FILTER_EFFECTS and not tolerated(pod.tolerations, t)]
        if not cols:
            return FilterResult.all_pass(n)
        positions = nodes.taint_positions
        if len(cols) == 1:  # the common case: one taint this pod does not tolerate
            failed = positions[:, cols[0]] != NO_TAINT
        else:
            failed = (positions[:, cols] != NO_TAINT).any(axis=1)
        if not failed.any():
            return FilterResult.all_pass(n)
        return FilterResult.fail_where(failed, REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]) -> IntArray:
        tols = prefer_no_schedule_tolerations(pod)
        cols = [i for i, t in enumerate(nodes.taints) if t[2] == "PreferNoSchedule" and not tolerated(tols, t)]
        if not cols:
            return np.zeros(len(rows), np.int64)
        positions = take(nodes.taint_positions, rows, len(nodes))
        if len(cols) == 1:
            return (positions[:, cols[0]] != NO_TAINT).astype(np.int64)
        return (positions[:, cols] != NO_TAINT).sum(axis=1).astype(np.int64)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize_score(scores, reverse=True)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> TaintToleration:
    return TaintToleration()
