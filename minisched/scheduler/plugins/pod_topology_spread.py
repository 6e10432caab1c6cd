"""PodTopologySpread (PreFilter, Filter, PreScore, Score): spread a pod's siblings evenly over
topology domains (zones, hosts, ...), as kube-scheduler v1.35's plugin does.

Which constraints: the pod's own topologySpreadConstraints; a pod with none gets the default
constraints (PodTopologySpreadArgs.defaultingType System: hostname maxSkew 3 and zone maxSkew 5, both
ScheduleAnyway; or List: args.defaultConstraints), with a selector built from the Services,
ReplicaSet, StatefulSet or ReplicationController that own or select the pod (kube's
helper.DefaultSelector). No such object, no default constraints.

DoNotSchedule constraints filter: on a node whose domain holds `n` matching pods, the pod fits only
if n + (1 if the pod itself matches) - (the fewest matching pods in any eligible domain; 0 when
fewer than minDomains domains exist) is at most maxSkew; a node without the topology label fails,
unresolvably. ScheduleAnyway constraints score: fewer matching pods in a node's domain, weighted by
log(number of domains + 2), plus maxSkew - 1; nodes lacking a key are "ignored" (scored 0), except
under system defaults, where a node without a zone label is still spread by hostname.

Domains are counted over every node (not only feasible ones) that carries all the keys and passes
the constraint's nodeAffinityPolicy / nodeTaintsPolicy; pods count only from the pod's namespace,
not terminating, matching the selector (matchLabelKeys folded in). Counting uses the NodeTable's pod
index: label-selector matches per node are numpy over pod columns, not a loop over pods.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.resources import REPLICA_SETS, REPLICATION_CONTROLLERS, STATEFUL_SETS
from minisched.scheduler.framework import cluster_event as ce
from minisched.scheduler.framework import signature
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import MAX_NODE_SCORE, FilterResult, Handle, PreFilterResult
from minisched.scheduler.framework.listers import StaticWorkloads, WorkloadLister
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import (
    LabelSelector,
    PodInfo,
    PodSpecError,
    Requirement,
    SpreadConstraint,
    spread_constraint,
)
from minisched.scheduler.plugins import node_affinity, taint_toleration
from minisched.scheduler.plugins.helpers import assigned_node, node_labels, parsed_pod, take
from minisched.scheduler.snapshot import NO_TAINT, NodeTable

log = logging.getLogger(__name__)

NAME = "PodTopologySpread"
ERR_CONSTRAINTS = "node(s) didn't match pod topology spread constraints"
ERR_MISSING_LABEL = ERR_CONSTRAINTS + " (missing required label)"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE, SCHEDULE_ANYWAY = "DoNotSchedule", "ScheduleAnyway"
SYSTEM, LIST = "System", "List"
_MAX_INT32 = 2**31 - 1
_PRE_FILTER = "PreFilterPodTopologySpread"
_PRE_SCORE = "PreScorePodTopologySpread"
_DEFAULT_SELECTOR = "PodTopologySpread.defaultSelector"

Object = dict[str, Any]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

# v1.TopologySpreadConstraint without selectors: kube's systemDefaultConstraints
SYSTEM_DEFAULT_CONSTRAINTS: tuple[SpreadConstraint, ...] = (
    SpreadConstraint(3, HOSTNAME, SCHEDULE_ANYWAY, None),
    SpreadConstraint(5, ZONE, SCHEDULE_ANYWAY, None),
)


# ---- the objects default selectors come from -------------------------------------------------------
_OWNER_KINDS = {("v1", "ReplicationController"): REPLICATION_CONTROLLERS,
                ("apps/v1", "ReplicaSet"): REPLICA_SETS, ("apps/v1", "StatefulSet"): STATEFUL_SETS}


def _map_requirements(labels: Mapping[str, str]) -> list[Requirement]:
    return [Requirement(str(k), "In", (str(v),)) for k, v in sorted(labels.items())]


def default_selector(pod: PodInfo, lister: WorkloadLister) -> LabelSelector:
    """kube's helper.DefaultSelector: the selectors of the Services selecting the pod, merged, plus
    the selector of its controlling ReplicationController, ReplicaSet or StatefulSet."""
    labels = dict(pod.labels)
    label_set: dict[str, str] = {}
    for svc in lister.services(pod.namespace):
        selector = (svc.get("spec") or {}).get("selector")
        if selector is None:  # a nil selector matches nothing, not everything
            continue
        if all(labels.get(k) == v for k, v in selector.items()):
            label_set.update(selector)
    requirements = _map_requirements(label_set)
    owner = next((o for o in (pod.pod.get("metadata") or {}).get("ownerReferences") or [] if o.get("controller")),
                 None)
    resource = _OWNER_KINDS.get((owner.get("apiVersion"), owner.get("kind"))) if owner else None
    if owner is None or resource is None:
        return LabelSelector(tuple(requirements))
    obj = lister.get(resource, pod.namespace, str(owner.get("name") or ""))
    if obj is None:
        return LabelSelector(tuple(requirements))
    selector = (obj.get("spec") or {}).get("selector")
    if resource == REPLICATION_CONTROLLERS:
        label_set.update(selector or {})
        return LabelSelector(tuple(_map_requirements(label_set)))
    if selector is None:  # LabelSelectorAsSelector(nil) is Nothing, whose requirements are not added
        return LabelSelector(tuple(requirements))
    try:
        extra = spread_constraint({"maxSkew": 1, "topologyKey": "x", "whenUnsatisfiable": SCHEDULE_ANYWAY,
                                   "labelSelector": selector}, 0, {}).selector
    except PodSpecError:  # an invalid selector is skipped, as LabelSelectorAsSelector's error is
        return LabelSelector(tuple(requirements))
    assert extra is not None
    return LabelSelector(tuple(requirements) + extra.requirements)


# ---- args ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpreadArgs:
    """PodTopologySpreadArgs (kubescheduler.config.k8s.io/v1), validated as kube validates them."""

    defaulting_type: str = SYSTEM
    default_constraints: tuple[SpreadConstraint, ...] = ()

    @property
    def constraints(self) -> tuple[SpreadConstraint, ...]:
        return SYSTEM_DEFAULT_CONSTRAINTS if self.defaulting_type == SYSTEM else self.default_constraints

    @classmethod
    def parse(cls, args: Mapping[str, Any] | None) -> SpreadArgs:
        args = dict(args or {})
        unknown = set(args) - {"defaultConstraints", "defaultingType"}
        if unknown:
            raise ValueError(f"PodTopologySpreadArgs: unknown field(s) {sorted(unknown)}")
        kind = args.get("defaultingType") or SYSTEM  # v1 defaulting
        if kind not in (SYSTEM, LIST):
            raise ValueError(f'PodTopologySpreadArgs.defaultingType: Unsupported value: "{kind}": '
                             'supported values: "List", "System"')
        raw = args.get("defaultConstraints") or []
        if kind == SYSTEM and raw:
            raise ValueError('PodTopologySpreadArgs.defaultConstraints: Invalid value: when .defaultingType is '
                             '"System", .defaultConstraints must be empty')
        parsed: list[SpreadConstraint] = []
        seen: set[tuple[str, str]] = set()
        for i, c in enumerate(raw):
            path = f"PodTopologySpreadArgs.defaultConstraints[{i}]"
            if not isinstance(c, Mapping):
                raise ValueError(f"{path} is not an object")
            if c.get("labelSelector") is not None:
                raise ValueError(f"{path}.labelSelector: Forbidden: constraint must not define a selector, "
                                 "as they deduced for each pod")
            try:
                sc = spread_constraint(dict(c), i, {})
            except PodSpecError as e:
                raise ValueError(f"PodTopologySpreadArgs: {e}".replace("spec.topologySpreadConstraints",
                                                                        "defaultConstraints")) from None
            pair = (sc.topology_key, sc.when_unsatisfiable)
            if pair in seen:
                raise ValueError(f"{path}: Duplicate value: {{{sc.topology_key}, {sc.when_unsatisfiable}}}")
            seen.add(pair)
            parsed.append(sc)
        return cls(kind, tuple(parsed))


# ---- which constraints apply to a pod --------------------------------------------------------------
def pod_constraints(pod: PodInfo, action: str, args: SpreadArgs, lister: WorkloadLister | None,
                    state: CycleState | None = None) -> tuple[list[SpreadConstraint], bool]:
    """(constraints for `action`, whether they are the pod's own). kube's getConstraints /
    initPreScoreState: the pod's own, else the defaults with the deduced selector."""
    if pod.spread_constraints:
        return [c for c in pod.spread_constraints if c.when_unsatisfiable == action], True
    defaults = [c for c in args.constraints if c.when_unsatisfiable == action]
    if not defaults or lister is None:
        return [], False
    selector = state.get(_DEFAULT_SELECTOR) if state is not None else None
    if selector is None:
        selector = default_selector(pod, lister)
        if state is not None:
            state.write(_DEFAULT_SELECTOR, selector)
    if not selector.requirements:  # selector.Empty(): no default spreading
        return [], False
    return [SpreadConstraint(c.max_skew, c.topology_key, c.when_unsatisfiable, selector, c.min_domains,
                             c.node_affinity_policy, c.node_taints_policy) for c in defaults], False


def _counts_pods(c: SpreadConstraint) -> bool:
    """countPodsMatchSelector counts nothing for a nil (Nothing) or empty selector."""
    return c.selector is not None and bool(c.selector.requirements)


def _self_match(c: SpreadConstraint, pod: PodInfo) -> int:
    return int(c.selector is not None and c.selector.matches(dict(pod.labels)))


def _pod_counts(c: SpreadConstraint, p: PodInfo, namespace: str) -> bool:
    return _counts_pods(c) and c.counts(p, namespace)


# ---- the pure rules, one node at a time (given every node, since domains span nodes) ----------------
def _included(c: SpreadConstraint, pod: PodInfo, node: Object) -> bool:
    """kube's matchNodeInclusionPolicies."""
    if c.node_affinity_policy == "Honor" and not node_affinity.fits(pod, node):
        return False
    return not (c.node_taints_policy == "Honor" and taint_toleration.untolerated_taint(pod, node) is not None)


def filter_reason(pod: PodInfo, node: Object, all_nodes: Sequence[Object],
                  pods_on: Mapping[str, Sequence[PodInfo]], constraints: Sequence[SpreadConstraint]) -> str | None:
    """The pure filter rule (kube's calPreFilterState + Filter): why `node` fails, or None."""
    keys = [c.topology_key for c in constraints]
    per_domain: list[dict[str, int]] = [{} for _ in constraints]
    for other in all_nodes:
        labels = node_labels(other)
        if not all(k in labels for k in keys):
            continue
        name = other["metadata"]["name"]
        for i, c in enumerate(constraints):
            if _included(c, pod, other):
                count = sum(1 for p in pods_on.get(name, ()) if _pod_counts(c, p, pod.namespace))
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


def score_of(pod: PodInfo, node: Object, feasible: Sequence[Object], all_nodes: Sequence[Object],
             pods_on: Mapping[str, Sequence[PodInfo]], constraints: Sequence[SpreadConstraint],
             require_all: bool = True) -> int | None:
    """The pure raw score for one feasible node (kube's initPreScoreState + PreScore + Score);
    None: the node is ignored (it lacks a key and every key is required)."""
    keys = [c.topology_key for c in constraints]

    def has_all(n: Object) -> bool:
        return all(k in node_labels(n) for k in keys)

    if require_all and not has_all(node):
        return None
    kept = [f for f in feasible if not require_all or has_all(f)]
    total = 0.0
    labels = node_labels(node)
    for c in constraints:
        if c.topology_key == HOSTNAME:
            size = len(kept)
        else:
            size = len({node_labels(f).get(c.topology_key, "") for f in kept})
        if c.topology_key not in labels:
            continue
        if c.topology_key == HOSTNAME:
            cnt = sum(1 for p in pods_on.get(node["metadata"]["name"], ()) if _pod_counts(c, p, pod.namespace))
        else:
            cnt = 0
            for other in all_nodes:
                if require_all and not has_all(other):
                    continue
                if _included(c, pod, other) and node_labels(other).get(c.topology_key, "") == labels[c.topology_key]:
                    cnt += sum(1 for p in pods_on.get(other["metadata"]["name"], ())
                               if _pod_counts(c, p, pod.namespace))
        total += cnt * math.log(size + 2) + float(c.max_skew - 1)
    return math.floor(total + 0.5)  # math.Round of a non-negative score


def normalize(scores: Sequence[int], ignored: Sequence[bool]) -> list[int]:
    """kube's NormalizeScore, one value at a time."""
    kept = [s for s, ig in zip(scores, ignored, strict=True) if not ig]
    low, high = (min(kept), max(max(kept), 0)) if kept else (0, 0)
    out = []
    for s, ig in zip(scores, ignored, strict=True):
        if ig:
            out.append(0)
        elif high == 0:
            out.append(MAX_NODE_SCORE)
        else:
            out.append(MAX_NODE_SCORE * (high + low - s) // high)
    return out


# ---- vectorised ----------------------------------------------------------------------------------------
def _keys_present(nodes: NodeTable, constraints: Sequence[SpreadConstraint]) -> BoolArray:
    present = np.ones(len(nodes), np.bool_)
    for c in constraints:
        col = nodes.label_column(c.topology_key)
        present &= (col >= 0) if col is not None else False
    return present


class _Masks:
    """Per-cycle pieces shared by the constraints of one pod on one table."""

    def __init__(self, pod: PodInfo, nodes: NodeTable) -> None:
        self.pod, self.nodes = pod, nodes
        self._affinity: BoolArray | None = None
        self._tolerated: BoolArray | None = None
        self._counts: dict[LabelSelector | None, IntArray] = {}

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
        """Matching pods per node (namespace, not terminating, selector) from the pod index."""
        if c.selector not in self._counts:
            if not _counts_pods(c):
                self._counts[c.selector] = np.zeros(len(self.nodes), np.int64)
            else:
                assert c.selector is not None
                self._counts[c.selector] = self.nodes.count_matching(c.selector, self.pod.namespace)
        return self._counts[c.selector]


@dataclass
class _FilterState:
    """What PreFilter computed over the whole snapshot (kube's preFilterState)."""

    table: NodeTable
    constraints: list[SpreadConstraint]
    cols: list[npt.NDArray[np.int32] | None]  # topology value id per node, per constraint
    eligible: list[BoolArray]  # nodes counted toward domains, per constraint
    node_counts: list[IntArray]  # matching pods per node, per constraint
    per_domain: list[IntArray]  # matching pods per value id, per constraint
    present: list[BoolArray]  # value ids that are eligible domains, per constraint
    self_match: list[int] = field(default_factory=list)


def _domain_min(per_domain: IntArray, present: BoolArray, min_domains: int | None) -> int:
    domains = int(present.sum())
    least = int(per_domain[present].min()) if domains else _MAX_INT32
    return 0 if domains < (min_domains or 1) else least


class PodTopologySpread:
    name = NAME

    def events_to_register(self) -> list[ce.ClusterEventWithHint]:
        """kube 1.35: an assigned pod added, relabelled or deleted (with a hint); a node added,
        deleted, relabelled or retainted (no hint here: domains come and go with them)."""
        return [*ce.events(self.is_schedulable_after_pod_change, ce.ASSIGNED_POD_ADD, ce.ASSIGNED_POD_UPDATE,
                           ce.ASSIGNED_POD_DELETE),
                *ce.events(None, ce.NODE_ADD, ce.NODE_DELETE, ce.NODE_LABEL_CHANGE, ce.NODE_TAINT_CHANGE)]

    def is_schedulable_after_pod_change(self, pod: Object, old: Object | None, new: Object | None) -> ce.QueueingHint:
        """kube's isSchedulableAfterPodChange: only an assigned pod of the same namespace counts;
        an added or deleted one if a constraint selects it, a relabelled one if a constraint's
        verdict on it changed."""
        info = parsed_pod(pod)
        if info is None:
            return ce.QUEUE
        for other in (old, new):
            if other is not None and (not assigned_node(other)
                                      or (other.get("metadata") or {}).get("namespace", "default") != info.namespace):
                return ce.QUEUE_SKIP
        constraints, _ = pod_constraints(info, DO_NOT_SCHEDULE, self.args, self.lister)
        selectors = [c.selector for c in constraints]

        def labels(obj: Object) -> dict[str, str]:
            return dict((obj.get("metadata") or {}).get("labels") or {})

        def selected(obj: Object) -> list[bool]:
            return [s is not None and s.matches(labels(obj)) for s in selectors]

        if old is not None and new is not None:
            return ce.QUEUE if selected(old) != selected(new) else ce.QUEUE_SKIP
        changed = new if new is not None else old
        assert changed is not None
        return ce.QUEUE if any(selected(changed)) else ce.QUEUE_SKIP
    reads_pods = True
    reads_other_nodes = True  # a node's verdict moves with pods on other nodes of its domain

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[signature.Fragment], Status]:
        """A pod's constraints and what their selectors match it by (namespace, labels); with
        default constraints, also its owners, whose selectors the defaults take."""
        fragments: list[signature.Fragment] = []
        if pod.spread_constraints or self.args.constraints:
            fragments += [(signature.TOPOLOGY_SPREAD_CONSTRAINTS, pod.spread_constraints),
                          (signature.NAMESPACE, pod.namespace), (signature.LABELS, pod.labels)]
        if self.args.constraints:
            owners = (pod.pod.get("metadata") or {}).get("ownerReferences") or []
            fragments.append((signature.OWNER_REFERENCES, signature.canonical_json(owners)))
        return fragments, Status.success()

    def may_batch(self, pod: PodInfo) -> Status:
        """kube: spreading depends on pods across a whole domain, so no batching for a pod with
        constraints, and none for any pod when default constraints are configured (the System
        defaulting of the default profile included)."""
        if pod.spread_constraints:
            return signature.refusal(NAME, "pods with topology constraints are not signable")
        if self.args.constraints:
            return signature.refusal(NAME, "pods with default topology constraints are not signable")
        return Status.success()

    @property
    def refuses_every_pod(self) -> bool:
        """Default constraints apply to every pod: may_batch refuses them all."""
        return bool(self.args.constraints)

    def __init__(self, args: SpreadArgs | None = None, lister: WorkloadLister | None = None) -> None:
        self.args = args or SpreadArgs()
        self.lister = lister
        self.system_defaulted = self.args.defaulting_type == SYSTEM

    # -- PreFilter / Filter
    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        constraints, _ = pod_constraints(pod, DO_NOT_SCHEDULE, self.args, self.lister, state)
        if not constraints:
            return None, Status.skip(NAME)
        masks = _Masks(pod, nodes)
        all_keys = _keys_present(nodes, constraints)
        s = _FilterState(nodes, constraints, [], [], [], [], [])
        for c in constraints:
            col = nodes.label_column(c.topology_key)
            eligible = all_keys & masks.included(c)
            counts = masks.counts(c)
            size = int(col.max()) + 1 if col is not None and col.size else 1
            per_domain = np.zeros(size, np.int64)
            present = np.zeros(size, np.bool_)
            if col is not None:
                np.add.at(per_domain, col[eligible], counts[eligible])
                present[col[eligible]] = True
            s.cols.append(col)
            s.eligible.append(eligible)
            s.node_counts.append(counts)
            s.per_domain.append(per_domain)
            s.present.append(present)
            s.self_match.append(_self_match(c, pod))
        state.write(_PRE_FILTER, s)
        return None, Status.success()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        n = len(nodes)
        s: _FilterState | None = state.get(_PRE_FILTER)
        if s is None:  # called without PreFilter (a test): compute it on this table
            _, status = self.pre_filter(state, pod, nodes)
            s = state.get(_PRE_FILTER)
            if s is None:
                return FilterResult.all_pass(n)
        whole = nodes is s.table
        reasons = np.zeros(n, np.int64)  # bit 0: missing label (unresolvable), bit 1: skew
        decided = np.zeros(n, np.bool_)
        for i, c in enumerate(s.constraints):
            col = nodes.label_column(c.topology_key)
            if col is None:
                reasons[~decided] = 1
                break
            missing = ~decided & (col < 0)
            reasons[missing] = 1
            decided |= missing
            per_domain = s.per_domain[i]
            if whole:
                least = _domain_min(per_domain, s.present[i], c.min_domains)
                match = np.zeros(n, np.int64)
                known = (col >= 0) & (col < per_domain.size)
                match[known] = per_domain[col[known]]
                skewed = ~decided & (match + s.self_match[i] - least > c.max_skew)
            else:
                skewed = ~decided & self._skewed_in_view(s, i, pod, nodes, col)
            reasons[skewed] = 2
            decided |= skewed
        failed = reasons != 0
        if not failed.any():
            return FilterResult.all_pass(n)
        return FilterResult(~failed, reasons, (ERR_MISSING_LABEL, ERR_CONSTRAINTS), Code.UNSCHEDULABLE,
                            unresolvable=reasons == 1)

    def _skewed_in_view(self, s: _FilterState, i: int, pod: PodInfo, view: NodeTable,
                        col: npt.NDArray[np.int32]) -> BoolArray:
        """A what-if view of a few nodes (preemption's victims removed, or the nominated node
        alone): PreFilter's domain counts, moved by what changed on the viewed nodes (kube's
        AddPod/RemovePod)."""
        c = s.constraints[i]
        per_domain = s.per_domain[i].copy()
        present = s.present[i]
        out = np.zeros(len(view), np.bool_)
        now = view.count_pods(lambda p: _pod_counts(c, p, pod.namespace))
        full_col = s.cols[i]
        for row, name in enumerate(view.names):
            full = s.table.row(name)
            if full is not None and full_col is not None and s.eligible[i][full]:
                vid = int(full_col[full])
                if vid >= 0:
                    per_domain[vid] += int(now[row]) - int(s.node_counts[i][full])
        least = _domain_min(per_domain, present, c.min_domains)
        for row in range(len(view)):
            vid = int(col[row])
            if vid < 0:
                continue
            match = int(per_domain[vid]) if vid < per_domain.size else 0
            out[row] = match + s.self_match[i] - least > c.max_skew
        return out

    # -- PreScore / Score
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]) -> Status:
        if len(nodes) == 0:
            return Status.skip(NAME)
        constraints, own = pod_constraints(pod, SCHEDULE_ANYWAY, self.args, self.lister, state)
        if not constraints:
            return Status.skip(NAME)
        # kube: only non-system-default spreading needs every key, so a zoneless node still spreads by host
        require_all = own or not self.system_defaulted
        state.write(_PRE_SCORE, (constraints, require_all))
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]) -> IntArray:
        pre = state.get(_PRE_SCORE)
        if pre is None:
            if not self.pre_score(state, pod, nodes, rows).is_success:
                return np.zeros(len(rows), np.int64)
            pre = state.get(_PRE_SCORE)
        constraints, require_all = pre
        n = len(nodes)
        masks = _Masks(pod, nodes)
        all_keys = _keys_present(nodes, constraints) if require_all else np.ones(n, np.bool_)
        ignored = ~take(all_keys, rows, n)
        state.write(_PRE_SCORE + ".ignored", ignored)
        kept = rows[~ignored]
        score = np.zeros(len(rows))
        for c in constraints:
            col = nodes.label_column(c.topology_key)
            if col is None:  # no node has the key: it adds nothing anywhere
                continue
            # a node without the key is the domain "" in kube's map (only without require_all)
            blank = nodes.label_value_id(c.topology_key, "")
            blank_id = blank if blank is not None else int(col.max()) + 1
            values = np.where(col >= 0, col, blank_id)
            if c.topology_key == HOSTNAME:
                size = kept.size
                cnt = take(masks.counts(c), rows, n).astype(np.float64)
            else:
                size = int(np.count_nonzero(np.bincount(values[kept], minlength=blank_id + 1)))
                counted = all_keys & masks.included(c)
                per_domain = np.bincount(values[counted], weights=masks.counts(c)[counted],
                                         minlength=blank_id + 1)
                cnt = per_domain[take(values, rows, n)]
            has_key = take(col, rows, n) >= 0
            contribution = cnt * math.log(size + 2) + float(c.max_skew - 1)
            score = score + np.where(has_key, contribution, 0.0)
        out = np.floor(score + 0.5).astype(np.int64)
        out[ignored] = 0
        return out

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        ignored = state.get(_PRE_SCORE + ".ignored")
        if ignored is None or ignored.shape != scores.shape:
            ignored = np.zeros(scores.shape, np.bool_)
        kept = scores[~ignored]
        if kept.size == 0:
            return np.zeros_like(scores)
        low, high = int(kept.min()), max(int(kept.max()), 0)
        if high == 0:
            out = np.full_like(scores, MAX_NODE_SCORE)
        else:
            out = MAX_NODE_SCORE * (high + low - scores) // high
        out[ignored] = 0
        return out


def workloads_of(handle: Handle | None) -> WorkloadLister:
    """Where default selectors come from: the handle's `workloads` (listers over its informers,
    kube's way, else reads through its cluster, else none); with no handle, no Services or
    controllers exist for the plugin, so no pod gets default constraints (as in a cluster without them)."""
    if handle is not None:
        return handle.workloads
    log.debug("PodTopologySpread without a cluster: no Services or controllers, so no default spreading")
    return StaticWorkloads(())


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> PodTopologySpread:
    parsed = SpreadArgs.parse(args)
    return PodTopologySpread(parsed, workloads_of(handle) if parsed.constraints else None)
