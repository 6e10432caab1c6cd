"""NodeAffinity (Filter, Score): spec.nodeSelector and required node affinity decide where a pod may
go; preferred terms add their weights to the nodes they match.

Vectorised through the label columns: a requirement on key k becomes a comparison of k's value-id
column with the ids of the values it names, so a term costs a few array operations over all nodes.
"""

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
from minisched.scheduler.framework.types import NodeSelectorTerm, PodInfo, Requirement
from minisched.scheduler.plugins.helpers import (
    default_normalize_score,
    node_labels,
    node_name,
    parsed_pod,
    take,
)
from minisched.scheduler.snapshot import NodeTable

NAME = "NodeAffinity"
REASON = "node(s) didn't match Pod's node affinity/selector"

Object = dict[str, Any]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


def fits(pod: PodInfo, node: Object) -> bool:
    """The pure filter rule for one node."""
    labels = node_labels(node)
    if any(labels.get(k) != v for k, v in pod.node_selector):
        return False
    if pod.required_terms is None:
        return True
    return any(term.matches(labels, node_name(node)) for term in pod.required_terms)


def preferred_score(pod: PodInfo, node: Object) -> int:
    """The pure raw score: the sum of the weights of the preferred terms the node matches."""
    labels, name = node_labels(node), node_name(node)
    return sum(weight for weight, term in pod.preferred_terms if term.matches(labels, name))


def requirement_mask(nodes: NodeTable, r: Requirement) -> BoolArray:
    n = len(nodes)
    col = nodes.label_column(r.key)
    if r.operator in ("In", "NotIn"):
        ids = [i for i in (nodes.label_value_id(r.key, v) for v in r.values) if i is not None]
        if col is None or not ids:
            hit = np.zeros(n, np.bool_)
        else:
            hit = (col == ids[0]) if len(ids) == 1 else np.isin(col, ids)
        return hit if r.operator == "In" else ~hit
    if r.operator == "Exists":
        return col >= 0 if col is not None else np.zeros(n, np.bool_)
    if r.operator == "DoesNotExist":
        return col < 0 if col is not None else np.ones(n, np.bool_)
    ints, ok = nodes.label_numeric(r.key)
    return ok & (ints > r.number) if r.operator == "Gt" else ok & (ints < r.number)


def field_mask(nodes: NodeTable, r: Requirement) -> BoolArray:
    hit = np.zeros(len(nodes), np.bool_)
    for v in r.values:
        row = nodes.row(v)
        if row is not None:
            hit[row] = True
    return hit if r.operator == "In" else ~hit


def term_mask(nodes: NodeTable, term: NodeSelectorTerm) -> BoolArray:
    if term.is_empty:
        return np.zeros(len(nodes), np.bool_)
    mask = np.ones(len(nodes), np.bool_)
    for r in term.expressions:
        mask &= requirement_mask(nodes, r)
    for r in term.fields:
        mask &= field_mask(nodes, r)
    return mask


def selector_mask(pod: PodInfo, nodes: NodeTable) -> BoolArray:
    n = len(nodes)
    mask = np.ones(n, np.bool_)
    for key, value in pod.node_selector:
        col, vid = nodes.label_column(key), nodes.label_value_id(key, value)
        if col is None or vid is None:
            return np.zeros(n, np.bool_)
        mask &= col == vid
    if pod.required_terms is not None:
        any_term = np.zeros(n, np.bool_)
        for term in pod.required_terms:
            any_term |= term_mask(nodes, term)
        mask &= any_term
    return mask


ERR_REASON_CONFLICT = "pod affinity terms conflict"


def node_names_required(pod: PodInfo) -> frozenset[str] | None:
    """kube's PreFilter narrowing: when every required term pins metadata.name with In, only those
    nodes can match (terms are ORed, requirements within a term ANDed). None: any node may."""
    if pod.required_terms is None:
        return None
    names: set[str] | None = None
    for term in pod.required_terms:
        term_names: set[str] | None = None
        for r in term.fields:
            if r.key == "metadata.name" and r.operator == "In":
                term_names = set(r.values) if term_names is None else term_names & set(r.values)
        if term_names is None:
            return None  # this term does not pin names, and terms are ORed
        names = term_names if names is None else names | term_names
    return frozenset(names) if names is not None else None


class NodeAffinity:
    name = NAME

    def events_to_register(self) -> list[ce.ClusterEventWithHint]:
        """kube 1.35: a node added or its labels changed, with a hint."""
        return ce.events(self.is_schedulable_after_node_change, ce.NODE_ADD, ce.NODE_LABEL_CHANGE)

    def is_schedulable_after_node_change(self, pod: Object, old: Object | None, new: Object | None) -> ce.QueueingHint:
        """kube's: queue when the node now matches the pod's nodeSelector and required affinity and
        did not before (or is new)."""
        info = parsed_pod(pod)
        if info is None or new is None:
            return ce.QUEUE
        if not fits(info, new):
            return ce.QUEUE_SKIP
        return ce.QUEUE if old is None or not fits(info, old) else ce.QUEUE_SKIP
    reads_pods = False  # results depend only on the pod and the node objects

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[signature.Fragment], Status]:
        return [(signature.NODE_AFFINITY, signature.node_affinity_signer(pod)),
                (signature.NODE_SELECTOR, tuple(sorted(pod.node_selector)))], Status.success()

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        if not pod.node_selector and pod.required_terms is None:
            return None, Status.skip(NAME)
        names = node_names_required(pod)
        if names is not None and not names:
            return None, Status.unschedulable(ERR_REASON_CONFLICT, plugin=NAME, unresolvable=True)
        return (PreFilterResult(names) if names else None), Status.success()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        if not pod.node_selector and pod.required_terms is None:
            return FilterResult.all_pass(len(nodes))
        return FilterResult.fail_where(~selector_mask(pod, nodes), REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]) -> Status:
        return Status.success() if pod.preferred_terms else Status.skip(NAME)

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]) -> IntArray:
        total = np.zeros(len(nodes), np.int64)
        for weight, term in pod.preferred_terms:
            total += weight * term_mask(nodes, term)
        return take(total, rows, len(nodes))

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        return default_normalize_score(scores)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> NodeAffinity:
    if args and args.get("addedAffinity"):
        raise ValueError("NodeAffinity: addedAffinity is not supported by minisched")
    return NodeAffinity()
