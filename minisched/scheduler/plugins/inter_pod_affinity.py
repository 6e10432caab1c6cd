"""InterPodAffinity (PreFilter, Filter, PreScore, Score): place a pod near, or away from, pods
that match its podAffinity / podAntiAffinity terms, in a topology domain (a node, a zone, any
node label), and keep existing pods' required anti-affinity from being broken by a newcomer.

kube-scheduler's plugins/interpodaffinity, step by step:

- PreFilter counts, per topology pair (label key, value), the existing pods that match all of the
  pod's required affinity terms, those that match each required anti-affinity term, and the
  existing pods whose required anti-affinity terms match the pod. Nothing to count: Skip.
- Filter, per node, in this order: a node lacking a required affinity term's topology label, or
  whose domain holds no matching pod, fails UnschedulableAndUnresolvable "node(s) didn't match
  pod affinity rules" (unless no pod anywhere matches and the pod matches its own terms: the
  first pod of a group); a node whose domain holds a pod the anti-affinity terms match fails
  Unschedulable "node(s) didn't match pod anti-affinity rules"; a node in a domain an existing
  pod's anti-affinity covers fails Unschedulable "node(s) didn't satisfy existing pods
  anti-affinity rules". Unschedulable, because evicting those pods (preemption) can help.
- PreScore/Score: each domain gets the weights of the pod's preferred terms that existing pods
  there match (anti-affinity subtracts), plus the weights of existing pods' preferred terms (and,
  times hardPodAffinityWeight, their required affinity terms) that the pod matches; a node scores
  its domains' sums. NormalizeScore maps min..max to 0..100.

Term namespaces: the listed ones, those a namespaceSelector picks (the empty selector: all), or
the pod's own. Where kube walks every pod of every node, this counts with numpy over the node
table's pod index (minisched/scheduler/pod_index.py); the pure functions at the end are the
per-node rules the tests hold the vectorised code to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework import cluster_event as ce
from minisched.scheduler.framework import signature
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import MAX_NODE_SCORE, FilterResult, Handle, PreFilterResult
from minisched.scheduler.framework.listers import Namespaces, StaticNamespaces, StoreNamespaces
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import AffinityTerm, LabelSelector, PodInfo
from minisched.scheduler.plugins.helpers import assigned_node, node_labels, node_name, parsed_pod, take
from minisched.scheduler.pod_index import (
    PREFERRED_AFFINITY,
    PREFERRED_ANTI_AFFINITY,
    REQUIRED_AFFINITY,
    REQUIRED_ANTI_AFFINITY,
    PodIndex,
)
from minisched.scheduler.snapshot import NodeTable

NAME = "InterPodAffinity"
ERR_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
ERR_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
MESSAGES = (ERR_AFFINITY, ERR_ANTI_AFFINITY, ERR_EXISTING_ANTI_AFFINITY)
DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1
_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME

Object = dict[str, Any]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
Counts = dict[str, IntArray]  # topology key -> count per value id of that node label


def incoming_scope(term: AffinityTerm, namespaces: Namespaces) -> AffinityTerm:
    """kube's mergeAffinityTermNamespacesIfNotEmpty, for the incoming pod's terms: the namespaces a
    non-empty namespaceSelector selects now join the term's names.

    kube 1.35 passes the term by value there, so its NamespaceSelector is NOT replaced by Nothing
    as the comment intends: it stays, and the incoming pod's terms are then matched with no
    namespace labels (Matches(pod, nil)). A selector that an empty label set satisfies (only
    NotIn / DoesNotExist requirements) therefore lets pods of every namespace through. minisched
    keeps the selector too and matches it against no labels, to decide as kube-scheduler does."""
    sel = term.namespace_selector
    if sel is None or not sel.requirements:
        return term
    picked = {name for name, labels in namespaces.all() if sel.matches(labels)}
    return replace(term, namespaces=term.namespaces | picked)


def _matches_all(terms: Sequence[AffinityTerm], pod: PodInfo) -> bool:
    """kube's podMatchesAllAffinityTerms (terms already through incoming_scope)."""
    return bool(terms) and all(t.matches(pod, None) for t in terms)


# ---- state ----
@dataclass
class _FilterState:
    pod: PodInfo
    affinity_terms: tuple[AffinityTerm, ...]  # resolved namespaces (incoming_scope)
    anti_terms: tuple[AffinityTerm, ...]
    namespace_labels: Mapping[str, str] | None  # the pod's namespace's, for existing pods' terms
    table: NodeTable  # the snapshot PreFilter counted on: node labels for add_pod/remove_pod
    affinity: Counts
    anti: Counts
    existing: Counts

    def copy(self) -> _FilterState:
        return replace(self, affinity={k: a.copy() for k, a in self.affinity.items()},
                       anti={k: a.copy() for k, a in self.anti.items()},
                       existing={k: a.copy() for k, a in self.existing.items()})


@dataclass
class _ScoreState:
    scores: Counts = field(default_factory=dict)


# ---- counting with numpy ----
def _value_ids(nodes: NodeTable, key: str, rows: npt.NDArray[Any] | None = None) -> npt.NDArray[np.int32]:
    """Label `key`'s value id on each node row in `rows` (all rows if None), -1 where absent."""
    col = nodes.label_column(key)
    if col is None:
        return np.full(len(nodes) if rows is None else len(rows), -1, np.int32)
    return col if rows is None else col[rows]


def _domain_size(nodes: NodeTable, key: str) -> int:
    col = nodes.label_column(key)
    return int(col.max()) + 1 if col is not None and col.size else 0


def _add_counts(into: Counts, nodes: NodeTable, key: str, node_rows: npt.NDArray[Any],
                weights: npt.NDArray[Any] | None = None) -> bool:
    """Add one (or `weights`) per entry of `node_rows` to its node's domain of `key`. Returns
    whether any entry's node has the key (kube creates the map entry then, even for weight 0)."""
    vids = _value_ids(nodes, key, node_rows)
    has = vids >= 0
    if not has.any():
        return False
    size = max(_domain_size(nodes, key), 1)
    w = None if weights is None else weights[has]
    counts = np.bincount(vids[has], weights=w, minlength=size)
    counts = np.rint(counts).astype(np.int64) if w is not None else counts.astype(np.int64)
    if key in into:
        into[key] = into[key] + counts
    else:
        into[key] = counts
    return True


def _lookup(counts: IntArray | None, vids: npt.NDArray[np.int32]) -> IntArray:
    """counts[vid] per node, 0 where the node lacks the key or the count does not reach."""
    if counts is None or counts.size == 0 or vids.size == 0:
        return np.zeros(len(vids), np.int64)
    # a zero after the counts: vid -1 (no label) reads it
    padded = np.zeros(max(counts.size, int(vids.max()) + 1) + 1, np.int64)
    padded[: counts.size] = counts
    return padded[vids]


def _by_topology_key(pc: PodIndex, term_ids: npt.NDArray[Any]) -> list[tuple[str, BoolArray]]:
    """Term entries grouped by their term's topology key, in order of first appearance: (key, mask
    over `term_ids`). Python looks at each distinct term once; the entries are numpy's (a thousand
    pods carrying one term are one term here, not a thousand string comparisons)."""
    if term_ids.size == 0:
        return []
    distinct, inverse = np.unique(term_ids, return_inverse=True)
    names: dict[str, int] = {}
    key_of_distinct = np.fromiter((names.setdefault(pc.terms[int(t)].topology_key, len(names)) for t in distinct),
                                  np.intp, distinct.size)
    key_of_entry = key_of_distinct[inverse.reshape(-1)]
    if len(names) == 1:
        return [(next(iter(names)), np.ones(term_ids.size, np.bool_))]
    by_id = list(names)
    present, first = np.unique(key_of_entry, return_index=True)
    return [(by_id[int(k)], key_of_entry == k) for k in present[np.argsort(first, kind="stable")]]


def _incoming_slots(pc: PodIndex, term: AffinityTerm) -> BoolArray:
    """Slots of live pods that an incoming pod's term (namespaces resolved) matches."""
    mask = pc.selector_mask(term.selector) & pc.alive
    if term.namespace_selector is not None and term.namespace_selector.matches({}):
        return mask  # the empty selector (all namespaces), or kube's no-labels quirk (incoming_scope)
    return mask & pc.namespace_mask(term.namespaces)


class InterPodAffinity:
    name = NAME

    def events_to_register(self) -> list[ce.ClusterEventWithHint]:
        """kube 1.35: an assigned pod added, relabelled or deleted (with a hint); a node added or
        relabelled (no hint here: a new topology domain may hold what the pod needs)."""
        return [*ce.events(self.is_schedulable_after_pod_change, ce.ASSIGNED_POD_ADD, ce.ASSIGNED_POD_UPDATE,
                           ce.ASSIGNED_POD_DELETE),
                *ce.events(None, ce.NODE_ADD, ce.NODE_LABEL_CHANGE)]

    def is_schedulable_after_pod_change(self, pod: Object, old: Object | None, new: Object | None) -> ce.QueueingHint:
        """kube's isSchedulableAfterPodChange: an unscheduled pod changes nothing; an added pod
        helps if it matches all the pod's required affinity terms; a relabelled one if it starts
        matching them or stops matching its anti-affinity terms; a deleted one if it matched its
        anti-affinity terms. (Terms with a namespaceSelector are judged by their explicit
        namespaces alone here, which can only say QUEUE_SKIP wrongly for such terms: those queue.)"""
        if (new is not None and not assigned_node(new)) or (old is not None and not assigned_node(old)):
            return ce.QUEUE_SKIP
        info = parsed_pod(pod)
        if info is None:
            return ce.QUEUE
        pa = info.pod_affinity
        terms = pa.required_affinity if pa else ()
        anti = pa.required_anti_affinity if pa else ()
        if any(t.namespace_selector is not None for t in (*terms, *anti)):
            return ce.QUEUE
        before = parsed_pod(old) if old is not None else None
        after = parsed_pod(new) if new is not None else None
        if (old is not None and before is None) or (new is not None and after is None):
            return ce.QUEUE
        if before is not None and after is not None:
            if not _matches_all(terms, before) and _matches_all(terms, after):
                return ce.QUEUE
            if _matches_all(anti, before) and not _matches_all(anti, after):
                return ce.QUEUE
            return ce.QUEUE_SKIP
        if after is not None:
            return ce.QUEUE if _matches_all(terms, after) else ce.QUEUE_SKIP
        assert before is not None
        return ce.QUEUE if _matches_all(anti, before) else ce.QUEUE_SKIP
    reads_pods = True
    reads_other_nodes = True  # a node's verdict moves with pods anywhere in its topology domains

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[signature.Fragment], Status]:
        """As kube: the pod's labels (other pods' terms may select it), unless only pods with terms
        are considered; and a pod with terms of its own, those and where they look."""
        fragments: list[signature.Fragment] = []
        if pod.pod_affinity is not None:
            fragments += [(signature.POD_AFFINITY, pod.pod_affinity), (signature.NAMESPACE, pod.namespace),
                          (signature.LABELS, pod.labels)]
        elif not self.ignore_preferred_terms_of_existing_pods:
            fragments.append((signature.LABELS, pod.labels))
        return fragments, Status.success()

    def may_batch(self, pod: PodInfo) -> Status:
        """kube: no batching for a pod with pod (anti-)affinity (its verdicts read other nodes)."""
        if pod.pod_affinity is not None:
            return signature.refusal(NAME, "pods with InterPodAffinity are not signable")
        return Status.success()

    def __init__(self, hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT,
                 ignore_preferred_terms_of_existing_pods: bool = False, handle: Handle | None = None,
                 namespaces: Namespaces | None = None) -> None:
        self.hard_pod_affinity_weight = hard_pod_affinity_weight
        self.ignore_preferred_terms_of_existing_pods = ignore_preferred_terms_of_existing_pods
        self.handle = handle
        self._namespaces = namespaces

    @property
    def namespaces(self) -> Namespaces:
        """The lister given, else the handle's (the Scheduler's informer, else the API), else none."""
        if self._namespaces is not None:
            return self._namespaces
        return self.handle.namespace_lister if self.handle is not None else StaticNamespaces()

    def _namespace_labels(self, pod: PodInfo, terms: Iterable[AffinityTerm]) -> Mapping[str, str] | None:
        """The pod's namespace's labels, looked up only when some term's namespaceSelector reads them."""
        if any(t.namespace_selector is not None and t.namespace_selector.requirements for t in terms):
            return self.namespaces.labels_of(pod.namespace)
        return None

    def _matching_terms(self, pc: PodIndex, kinds: Sequence[int], pod: PodInfo
                        ) -> tuple[npt.NDArray[np.intp], Mapping[str, str] | None]:
        """Entries of existing pods' terms of `kinds` (on live pods) whose term matches `pod`."""
        slot, tid, kind, _ = pc.term_entries()
        if slot.size == 0:
            return np.zeros(0, np.intp), None
        if len(kinds) == 1:
            sel = kind == kinds[0]
        else:
            wanted = np.zeros(PREFERRED_ANTI_AFFINITY + 1, np.bool_)  # the kinds are 0..3
            wanted[list(kinds)] = True
            sel = wanted[kind]
        sel &= pc.alive[slot]
        if not sel.any():
            return np.zeros(0, np.intp), None
        terms = pc.terms
        ns_labels = self.namespaces.labels_of(pod.namespace) if pc.namespace_selectors else None
        # whether each distinct term matches the pod: judged once per pod shape, then kept
        key = (pod.namespace, pod.labels, tuple(sorted(ns_labels.items())) if ns_labels is not None else None)
        matched = pc.match_cache.get(key)
        if matched is None or matched.size < len(terms):
            known = 0 if matched is None else matched.size
            fresh = np.fromiter((t.matches(pod, ns_labels) for t in terms[known:len(terms)]), np.bool_,
                                len(terms) - known)
            matched = fresh if matched is None else np.concatenate([matched, fresh])
            if len(pc.match_cache) > 256:
                pc.match_cache.clear()
            pc.match_cache[key] = matched
        sel &= matched[tid]
        return np.flatnonzero(sel), ns_labels

    # ------------------------------------------------------------ PreFilter
    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        pa = pod.pod_affinity
        if pa is None or not (pa.required_affinity or pa.required_anti_affinity):
            # the usual pod, every cycle: without terms of its own, only existing pods' anti-affinity
            # that selects it could reject a node
            entries, _ = self._matching_terms(nodes.indexed_pods(), (REQUIRED_ANTI_AFFINITY,), pod)
            if not entries.size:
                return None, Status.skip(NAME)
        s = self._filter_state(pod, nodes)
        if not s.existing and not s.affinity_terms and not s.anti_terms:
            return None, Status.skip(NAME)
        state.write(_PRE_FILTER_KEY, s)
        return None, Status.success()

    def _filter_state(self, pod: PodInfo, nodes: NodeTable) -> _FilterState:
        pa = pod.pod_affinity
        ns = self.namespaces
        affinity_terms = tuple(incoming_scope(t, ns) for t in pa.required_affinity) if pa else ()
        anti_terms = tuple(incoming_scope(t, ns) for t in pa.required_anti_affinity) if pa else ()
        pc = nodes.indexed_pods()
        rows = pc.node_rows
        affinity: Counts = {}
        anti: Counts = {}
        existing: Counts = {}
        if affinity_terms:
            mask = np.ones(pc.slots, np.bool_)
            for t in affinity_terms:
                mask &= _incoming_slots(pc, t)
            matched = rows[mask]
            if matched.size:
                for t in affinity_terms:
                    _add_counts(affinity, nodes, t.topology_key, matched)
        for t in anti_terms:
            matched = rows[_incoming_slots(pc, t)]
            if matched.size:
                _add_counts(anti, nodes, t.topology_key, matched)
        entries, ns_labels = self._matching_terms(pc, (REQUIRED_ANTI_AFFINITY,), pod)
        if entries.size:
            slot, tid, _, _ = pc.term_entries()
            for key, mine in _by_topology_key(pc, tid[entries]):
                _add_counts(existing, nodes, key, rows[slot[entries[mine]]])
        return _FilterState(pod, affinity_terms, anti_terms, ns_labels, nodes,
                            _nonzero(affinity), _nonzero(anti), _nonzero(existing))

    # ------------------------------------------------------------ PreFilterExtensions
    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node_name: str) -> Status:
        return self._update(state, pod_to_add, node_name, +1)

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo, node_name: str) -> Status:
        return self._update(state, pod_to_remove, node_name, -1)

    def _update(self, state: CycleState, other: PodInfo, node: str, sign: int) -> Status:
        """kube's preFilterState.updateWithPod, on a copy (cloned cycle states share values)."""
        s: _FilterState | None = state.get(_PRE_FILTER_KEY)
        if s is None:
            return Status.from_error(KeyError(f"cycle state has no {_PRE_FILTER_KEY!r}"), NAME)
        row = s.table.row(node)
        if row is None:
            return Status.success()
        s = s.copy()
        rows = np.array([row], np.intp)

        def bump(counts: Counts, key: str) -> None:
            vid = int(_value_ids(s.table, key, rows)[0])
            if vid < 0:
                return
            arr = counts.get(key)
            if arr is None or arr.size <= vid:
                grown = np.zeros(max(_domain_size(s.table, key), vid + 1), np.int64)
                if arr is not None:
                    grown[: arr.size] = arr
                arr = counts[key] = grown
            arr[vid] += sign

        pa = other.pod_affinity
        if pa is not None and pa.required_anti_affinity:
            ns_labels = s.namespace_labels
            if ns_labels is None:
                ns_labels = s.namespace_labels = self._namespace_labels(s.pod, pa.required_anti_affinity)
            for t in pa.required_anti_affinity:
                if t.matches(s.pod, ns_labels):
                    bump(s.existing, t.topology_key)
        if _matches_all(s.affinity_terms, other):
            for t in s.affinity_terms:
                bump(s.affinity, t.topology_key)
        for t in s.anti_terms:
            if t.matches(other, None):
                bump(s.anti, t.topology_key)
        s.affinity, s.anti, s.existing = _nonzero(s.affinity), _nonzero(s.anti), _nonzero(s.existing)
        state.write(_PRE_FILTER_KEY, s)
        return Status.success()

    # ------------------------------------------------------------ Filter
    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        s: _FilterState = state.read(_PRE_FILTER_KEY)
        n = len(nodes)
        affinity_fail = np.zeros(n, np.bool_)
        if s.affinity_terms:
            missing = np.zeros(n, np.bool_)
            pods_exist = np.ones(n, np.bool_)
            for t in s.affinity_terms:
                vids = _value_ids(nodes, t.topology_key)
                missing |= vids < 0
                pods_exist &= _lookup(s.affinity.get(t.topology_key), vids) > 0
            # the first pod of a group: nothing matches anywhere, and it matches its own terms
            first = not s.affinity and _matches_all(s.affinity_terms, s.pod)
            affinity_fail = missing | (~pods_exist & (not first))
        anti_fail = np.zeros(n, np.bool_)
        for t in s.anti_terms:
            anti_fail |= _lookup(s.anti.get(t.topology_key), _value_ids(nodes, t.topology_key)) > 0
        existing_fail = np.zeros(n, np.bool_)
        for key, counts in s.existing.items():
            existing_fail |= _lookup(counts, _value_ids(nodes, key)) > 0
        anti_fail &= ~affinity_fail
        existing_fail &= ~affinity_fail & ~anti_fail
        if not (affinity_fail.any() or anti_fail.any() or existing_fail.any()):
            return FilterResult.all_pass(n)
        reasons = affinity_fail * 1 + anti_fail * 2 + existing_fail * 4
        failed = reasons != 0
        return FilterResult(~failed, reasons.astype(np.int64), MESSAGES, Code.UNSCHEDULABLE,
                            unresolvable=affinity_fail)

    # ------------------------------------------------------------ PreScore / Score
    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]) -> Status:
        if len(rows) == 0:
            return Status.skip(NAME)
        pa = pod.pod_affinity
        has_constraints = pa is not None and bool(pa.preferred_affinity or pa.preferred_anti_affinity)
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return Status.skip(NAME)
        pc = nodes.indexed_pods()
        node_rows = pc.node_rows
        scores: Counts = {}
        touched = False
        if pa is not None and has_constraints:
            ns = self.namespaces
            for sign, weighted in ((1, pa.preferred_affinity), (-1, pa.preferred_anti_affinity)):
                for w in weighted:
                    t = incoming_scope(w.term, ns)
                    matched = node_rows[_incoming_slots(pc, t)]
                    if matched.size:
                        weights = np.full(matched.size, sign * w.weight, np.int64)
                        touched |= _add_counts(scores, nodes, t.topology_key, matched, weights)
        kinds = [PREFERRED_AFFINITY, PREFERRED_ANTI_AFFINITY]
        if self.hard_pod_affinity_weight > 0:
            kinds.append(REQUIRED_AFFINITY)
        entries, _ = self._matching_terms(pc, kinds, pod)
        if entries.size:
            slot, tid, kind, weight = pc.term_entries()
            k, ew = kind[entries], weight[entries]
            weights = np.where(k == REQUIRED_AFFINITY, self.hard_pod_affinity_weight,
                               np.where(k == PREFERRED_AFFINITY, ew, -ew)).astype(np.int64)
            for key, mine in _by_topology_key(pc, tid[entries]):
                touched |= _add_counts(scores, nodes, key, node_rows[slot[entries[mine]]], weights[mine])
        if not touched:
            return Status.skip(NAME)
        state.write(_PRE_SCORE_KEY, _ScoreState(scores))
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]) -> IntArray:
        s: _ScoreState = state.read(_PRE_SCORE_KEY)
        total = np.zeros(len(rows), np.int64)
        for key, counts in s.scores.items():
            col = nodes.label_column(key)
            if col is not None:
                total += _lookup(counts, take(col, rows, len(nodes)))
        return total

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: IntArray) -> IntArray:
        s: _ScoreState | None = state.get(_PRE_SCORE_KEY)
        if s is None or not s.scores or scores.size == 0:
            return scores
        return normalize(scores)


def normalize(scores: IntArray) -> IntArray:
    """kube's NormalizeScore: min..max onto 0..100 in float64, truncated; all equal: 0."""
    low, high = int(scores.min()), int(scores.max())
    if high - low <= 0:
        return np.zeros_like(scores)
    return (float(MAX_NODE_SCORE) * ((scores - low).astype(np.float64) / float(high - low))).astype(np.int64)


def _nonzero(counts: Counts) -> Counts:
    """Drop keys with no domain left above zero (kube deletes pairs that drop to 0)."""
    return {k: a for k, a in counts.items() if a.any()}


# ---- the pure rules, one node at a time (given every node and pod: domains span nodes) ----
PodsOn = Mapping[str, Sequence[PodInfo]]


def _pairs_filter(pod: PodInfo, all_nodes: Sequence[Object], pods_on: PodsOn, namespaces: Namespaces
                  ) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int], dict[tuple[str, str], int],
                             tuple[AffinityTerm, ...], tuple[AffinityTerm, ...]]:
    """kube's PreFilter maps, by walking every pod of every node."""
    pa = pod.pod_affinity
    aff_terms = tuple(incoming_scope(t, namespaces) for t in pa.required_affinity) if pa else ()
    anti_terms = tuple(incoming_scope(t, namespaces) for t in pa.required_anti_affinity) if pa else ()
    ns_labels = namespaces.labels_of(pod.namespace) or {}
    affinity: dict[tuple[str, str], int] = {}
    anti: dict[tuple[str, str], int] = {}
    existing: dict[tuple[str, str], int] = {}
    for node in all_nodes:
        labels = node_labels(node)
        for other in pods_on.get(node_name(node), ()):
            if _matches_all(aff_terms, other):
                for t in aff_terms:
                    if t.topology_key in labels:
                        pair = (t.topology_key, labels[t.topology_key])
                        affinity[pair] = affinity.get(pair, 0) + 1
            for t in anti_terms:
                if t.matches(other, None) and t.topology_key in labels:
                    pair = (t.topology_key, labels[t.topology_key])
                    anti[pair] = anti.get(pair, 0) + 1
            for t in other.pod_affinity.required_anti_affinity if other.pod_affinity else ():
                if t.matches(pod, ns_labels) and t.topology_key in labels:
                    pair = (t.topology_key, labels[t.topology_key])
                    existing[pair] = existing.get(pair, 0) + 1
    return affinity, anti, existing, aff_terms, anti_terms


def filter_reason(pod: PodInfo, node: Object, all_nodes: Sequence[Object], pods_on: PodsOn,
                  namespaces: Namespaces | None = None) -> str | None:
    """The pure filter rule: kube's satisfyPodAffinity, satisfyPodAntiAffinity and
    satisfyExistingPodsAntiAffinity for one node, in that order. None: the node passes."""
    affinity, anti, existing, aff_terms, anti_terms = _pairs_filter(
        pod, all_nodes, pods_on, namespaces or StaticNamespaces())
    labels = node_labels(node)
    pods_exist = True
    for t in aff_terms:
        if t.topology_key not in labels:
            return ERR_AFFINITY
        if affinity.get((t.topology_key, labels[t.topology_key]), 0) <= 0:
            pods_exist = False
    if not pods_exist and not (not affinity and _matches_all(aff_terms, pod)):
        return ERR_AFFINITY
    for t in anti_terms:
        if t.topology_key in labels and anti.get((t.topology_key, labels[t.topology_key]), 0) > 0:
            return ERR_ANTI_AFFINITY
    if any(existing.get((k, v), 0) > 0 for k, v in labels.items()):
        return ERR_EXISTING_ANTI_AFFINITY
    return None


def topology_scores(pod: PodInfo, all_nodes: Sequence[Object], pods_on: PodsOn, *,
                    hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT,
                    namespaces: Namespaces | None = None) -> dict[str, dict[str, int]]:
    """kube's PreScore topologyScore map (key -> value -> score), by walking every pod; empty when
    no term touched any domain (PreScore then skips)."""
    ns = namespaces or StaticNamespaces()
    pa = pod.pod_affinity
    ns_labels = ns.labels_of(pod.namespace) or {}
    own: list[tuple[AffinityTerm, int]] = []
    if pa is not None:
        own = [(incoming_scope(w.term, ns), w.weight) for w in pa.preferred_affinity]
        own += [(incoming_scope(w.term, ns), -w.weight) for w in pa.preferred_anti_affinity]
    out: dict[str, dict[str, int]] = {}

    def process(term: AffinityTerm, weight: int, target: PodInfo, target_ns: Mapping[str, str] | None,
                labels: Mapping[str, str]) -> None:
        if term.matches(target, target_ns) and term.topology_key in labels:
            domain = out.setdefault(term.topology_key, {})
            domain[labels[term.topology_key]] = domain.get(labels[term.topology_key], 0) + weight

    for node in all_nodes:
        labels = node_labels(node)
        if not labels:
            continue
        for other in pods_on.get(node_name(node), ()):
            for term, weight in own:
                process(term, weight, other, None, labels)
            opa = other.pod_affinity
            if opa is None:
                continue
            if hard_pod_affinity_weight > 0:
                for term in opa.required_affinity:
                    process(term, hard_pod_affinity_weight, pod, ns_labels, labels)
            for w in opa.preferred_affinity:
                process(w.term, w.weight, pod, ns_labels, labels)
            for w in opa.preferred_anti_affinity:
                process(w.term, -w.weight, pod, ns_labels, labels)
    return out


def raw_score(node: Object, scores: Mapping[str, Mapping[str, int]]) -> int:
    """The pure Score: the sum of the node's domains' scores."""
    labels = node_labels(node)
    return sum(values.get(labels[key], 0) for key, values in scores.items() if key in labels)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> InterPodAffinity:
    args = dict(args or {})
    unknown = set(args) - {"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods", "apiVersion", "kind"}
    if unknown:
        raise ValueError(f"{NAME} args: unknown field(s) {sorted(unknown)}")
    weight = args.get("hardPodAffinityWeight", DEFAULT_HARD_POD_AFFINITY_WEIGHT)
    if isinstance(weight, bool) or not isinstance(weight, int) or not 0 <= weight <= 100:
        raise ValueError(f"{NAME} args: hardPodAffinityWeight {weight!r} must be an integer in 0..100")
    ignore = args.get("ignorePreferredTermsOfExistingPods", False)
    if not isinstance(ignore, bool):
        raise ValueError(f"{NAME} args: ignorePreferredTermsOfExistingPods {ignore!r} must be true or false")
    return InterPodAffinity(weight, ignore, handle)


__all__: Sequence[str] = ("InterPodAffinity", "LabelSelector", "StaticNamespaces", "StoreNamespaces", "new")
