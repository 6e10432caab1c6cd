"""PodTopologySpread (PreFilter, Filter, PreScore, Score): spread a pod's siblings evenly over
topology domains (zones, hosts, ...), as topologySpreadConstraints ask.

DoNotSchedule constraints filter: on a node whose domain already holds `n` matching pods, the pod
fits only if n + (1 if the pod itself matches) - (the fewest matching pods in any domain) is at most
maxSkew; a node without the constraint's topology label fails outright. ScheduleAnyway constraints
score: fewer matching pods in a node's domain, weighted by log(number of domains + 2), is better.

Counting which pods match a selector is a Python loop over the pods (labels are not columns of the
node table); the domain arithmetic is numpy over nodes. Unlike kube-scheduler, there are no
cluster-level default constraints (pods without constraints are skipped), and the plugin is not in
the default profile: enable it in a KubeSchedulerConfiguration (kube's default weight is 2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import MAX_NODE_SCORE, FilterResult, Handle, PreFilterResult
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import PodInfo, SpreadConstraint
from minisched.scheduler.plugins import node_affinity, taint_toleration
from minisched.scheduler.plugins.helpers import node_labels, take
from minisched.scheduler.snapshot import NO_TAINT, NodeTable

NAME = "PodTopologySpread"
ERR_MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
ERR_CONSTRAINTS = "node(s) didn't match pod topology spread constraints"
HOSTNAME = "kubernetes.io/hostname"
_MAX_INT32 = 2**31 - 1
_IGNORED = "PreScorePodTopologySpread.ignored"

Object = dict[str, Any]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


def _filter_constraints(pod: PodInfo) -> list[SpreadConstraint]:
    return [c for c in pod.spread_constraints if c.when_unsatisfiable == "DoNotSchedule"]


def _score_constraints(pod: PodInfo) -> list[SpreadConstraint]:
    return [c for c in pod.spread_constraints if c.when_unsatisfiable == "ScheduleAnyway"]


def _self_match(c: SpreadConstraint, pod: PodInfo) -> int:
    return int(c.selector is not None and c.selector.matches(dict(pod.labels)))


# ---- the pure rules, one node at a time (given every node, since domains span nodes) ----
def _included(c: SpreadConstraint, pod: PodInfo, node: Object) -> bool:
    """kube's matchNodeInclusionPolicies."""
    if c.node_affinity_policy == "Honor" and not node_affinity.fits(pod, node):
        return False
    return not (c.node_taints_policy == "Honor" and taint_toleration.untolerated_taint(pod, node) is not None)


def filter_reason(pod: PodInfo, node: Object, all_nodes: Sequence[Object],
                  pods_on: Mapping[str, Sequence[PodInfo]]) -> str | None:
    """The pure filter rule: why `node` fails the pod's DoNotSchedule constraints, or None."""
    constraints = _filter_constraints(pod)
    keys = [c.topology_key for c in constraints]
    per_domain: list[dict[str, int]] = [{} for _ in constraints]
    for other in all_nodes:
        labels = node_labels(other)
        if not all(k in labels for k in keys):
            continue
        name = other["metadata"]["name"]
        for i, c in enumerate(constraints):
            if _included(c, pod, other):
                count = sum(1 for p in pods_on.get(name, ()) if c.counts(p, pod.namespace))
                per_domain[i][labels[c.topology_key]] = per_domain[i].get(labels[c.topology_key], 0) + count
    labels = node_labels(node)
    for i, c in enumerate(constraints):
        if c.topology_key not in labels:
            return ERR_MISSING_LABEL
        domains = per_domain[i]
        least = min(domains.values()) if domains else _MAX_INT32
        if len(domains) < (c.min_domains or 1):
            least = 0
        if domains.get(labels[c.topology_key], 0) + _self_match(c, pod) - least > c.max_skew:
            return ERR_CONSTRAINTS
    return None


# ---- vectorised ----
def _keys_present(nodes: NodeTable, constraints: Sequence[SpreadConstraint]) -> BoolArray:
    present = np.ones(len(nodes), np.bool_)
    for c in constraints:
        col = nodes.label_column(c.topology_key)
        present &= (col >= 0) if col is not None else False
    return present


class _Masks:
    """Per-cycle pieces shared by the constraints of one pod."""

    def __init__(self, pod: PodInfo, nodes: NodeTable) -> None:
        self.pod, self.nodes = pod, nodes
        self._affinity: BoolArray | None = None
        self._tolerated: BoolArray | None = None
        self._counts: dict[SpreadConstraint, IntArray] = {}

    def included(self, c: SpreadConstraint) -> BoolArray:
        mask = np.ones(len(self.nodes), np.bool_)
        if c.node_affinity_policy == "Honor":
            if self._affinity is None:
                self._affinity = node_affinity.selector_mask(self.pod, self.nodes)
            mask &= self._affinity
        if c.node_taints_policy == "Honor":
            if self._tolerated is None:
                cols = [i for i, t in enumerate(self.nodes.taints)
                        if t[2] in ("NoSchedule", "NoExecute") and not taint_toleration.tolerated(self.pod.tolerations, t)]
                self._tolerated = ~(self.nodes.taint_positions[:, cols] != NO_TAINT).any(axis=1) if cols else \
                    np.ones(len(self.nodes), np.bool_)
            mask &= self._tolerated
        return mask

    def counts(self, c: SpreadConstraint) -> IntArray:
        if c not in self._counts:
            ns = self.pod.namespace
            self._counts[c] = self.nodes.count_pods(lambda p: c.counts(p, ns))
        return self._counts[c]


class PodTopologySpread:
    name = NAME
    reads_pods = True
    reads_other_nodes = True  # a node's verdict moves with pods on other nodes of its domain

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        return None, (Status.success() if _filter_constraints(pod) else Status.skip(NAME))

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        constraints = _filter_constraints(pod)
        n = len(nodes)
        if not constraints:
            return FilterResult.all_pass(n)
        masks = _Masks(pod, nodes)
        all_keys = _keys_present(nodes, constraints)
        reasons = np.zeros(n, np.int64)  # bit 0: missing label (unresolvable), bit 1: skew
        decided = np.zeros(n, np.bool_)
        for c in constraints:
            col = nodes.label_column(c.topology_key)
            if col is None:
                reasons[~decided] = 1
                decided[:] = True
                break
            missing = ~decided & (col < 0)
            reasons[missing] = 1
            decided |= missing
            counted = all_keys & masks.included(c)
            domains = col[counted]
            per_domain = np.bincount(domains, weights=masks.counts(c)[counted], minlength=int(col.max()) + 1)
            present = np.unique(domains)
            least = int(per_domain[present].min()) if present.size else _MAX_INT32
            if present.size < (c.min_domains or 1):
                least = 0
            match = per_domain[np.maximum(col, 0)].astype(np.int64)
            skewed = ~decided & (match + _self_match(c, pod) - least > c.max_skew)
            reasons[skewed] = 2
            decided |= skewed
        failed = reasons != 0
        if not failed.any():
            return FilterResult.all_pass(n)
        return FilterResult(~failed, reasons, (ERR_MISSING_LABEL, ERR_CONSTRAINTS), Code.UNSCHEDULABLE,
                            unresolvable=reasons == 1)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]) -> Status:
        return Status.success() if _score_constraints(pod) else Status.skip(NAME)

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]) -> IntArray:
        constraints = _score_constraints(pod)
        n = len(nodes)
        if not constraints:
            return np.zeros(len(rows), np.int64)
        masks = _Masks(pod, nodes)
        all_keys = _keys_present(nodes, constraints)
        ignored = ~take(all_keys, rows, n)
        state.write(_IGNORED, ignored)
        kept = rows[~ignored]
        score = np.zeros(len(rows))
        for c in constraints:
            col = nodes.label_column(c.topology_key)
            if col is None:  # no node has the key: every row is ignored (scored 0) anyway
                continue
            if c.topology_key == HOSTNAME:
                size = kept.size
                cnt = take(masks.counts(c), rows, n)
            else:
                size = np.unique(col[kept]).size
                counted = all_keys & masks.included(c)
                per_domain = np.bincount(col[counted], weights=masks.counts(c)[counted],
                                         minlength=int(col.max()) + 1)
                cnt = per_domain[np.maximum(take(col, rows, n), 0)]
            weight = math.log(size + 2)
            score = score + (cnt.astype(np.float64) * weight + float(c.max_skew - 1))
        out = np.floor(score + 0.5).astype(np.int64)  # math.Round of non-negative scores
        out[ignored] = 0
        return out

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        ignored = state.get(_IGNORED)
        if ignored is None or ignored.shape != scores.shape:
            ignored = np.zeros(scores.shape, np.bool_)
        kept = scores[~ignored]
        if kept.size == 0:
            return np.zeros_like(scores)
        low, high = int(kept.min()), int(kept.max())
        if high == 0:
            out = np.full_like(scores, MAX_NODE_SCORE)
        else:
            out = MAX_NODE_SCORE * (high + low - scores) // high
        out[ignored] = 0
        return out


def score_of(pod: PodInfo, node: Object, feasible: Sequence[Object], all_nodes: Sequence[Object],
             pods_on: Mapping[str, Sequence[PodInfo]]) -> int | None:
    """The pure raw score for one feasible node (None: the node is ignored, it lacks a key)."""
    constraints = _score_constraints(pod)
    keys = [c.topology_key for c in constraints]
    labels = node_labels(node)
    if not all(k in labels for k in keys):
        return None
    kept = [f for f in feasible if all(k in node_labels(f) for k in keys)]
    total = 0.0
    for c in constraints:
        if c.topology_key == HOSTNAME:
            size = len(kept)
            cnt = sum(1 for p in pods_on.get(node["metadata"]["name"], ()) if c.counts(p, pod.namespace))
        else:
            size = len({node_labels(f)[c.topology_key] for f in kept})
            cnt = 0
            for other in all_nodes:
                other_labels = node_labels(other)
                if all(k in other_labels for k in keys) and _included(c, pod, other) \
                        and other_labels[c.topology_key] == labels[c.topology_key]:
                    cnt += sum(1 for p in pods_on.get(other["metadata"]["name"], ()) if c.counts(p, pod.namespace))
        total += cnt * math.log(size + 2) + float(c.max_skew - 1)
    return math.floor(total + 0.5)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> PodTopologySpread:
    args = dict(args or {})
    if args.get("defaultConstraints") or args.get("defaultingType") == "System":
        raise ValueError("PodTopologySpread: cluster-level default constraints are not supported by minisched")
    return PodTopologySpread()
