"""PodIndex: the assigned pods of a NodeTable as columns, so "how many pods on each node match this
label selector in this namespace" is a few numpy operations, not a Python loop over pods.

One slot per pod: the row of its node, its namespace id, whether it is terminating, and for every
label key any pod carries, the id of its value (-1 where the pod lacks the key). A selector becomes
a boolean mask over slots (In: the value id is one of the wanted ones; Exists: the id is not -1 ...),
and np.bincount over the matching slots' node rows gives the count per node. kube-scheduler loops
over each NodeInfo's pods instead (podtopologyspread's countPodsMatchSelector).

The NodeTable keeps one index and changes it as pods come and go; snapshots share its arrays
copy-on-write, as they share the table's. The value and namespace vocabularies only grow between
two compactions, so a snapshot can share them too; a compaction renumbers them (and the affinity
terms) from the live slots into new dicts, so pods long gone leave nothing behind.

The affinity terms pods carry (podAffinity, podAntiAffinity, required and preferred) are kept as
entries beside the slots: (slot, term id, kind, weight), each distinct term stored once. So "which
existing pods' anti-affinity does the new pod break?" is judged once per distinct term, not once
per pod (InterPodAffinity; kube walks each NodeInfo's PodsWithRequiredAntiAffinity). Entries are
append-only too; an entry whose slot is free is dead (check `alive[slot]`).

Counts asked for once are kept (per selector and namespace) and moved by each pod added or removed,
so the next cycle of the same ReplicaSet's pods reads them instead of scanning every pod again. A
snapshot that computes counts hands them back to the table it came from while the table has not
changed since (`_handback`), which is how the table learns which selectors are worth keeping.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.pod_info import AffinityTerm, LabelSelector, PodInfo, Requirement

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Int32Array = npt.NDArray[np.int32]

FREE = -1  # node row of an empty slot
# kinds of the affinity term entries
REQUIRED_AFFINITY = 0
REQUIRED_ANTI_AFFINITY = 1
PREFERRED_AFFINITY = 2
PREFERRED_ANTI_AFFINITY = 3
_MAX_KEPT = 32  # selectors whose counts are kept; more, and all are dropped (a cache, not a store)
COMPACT_MIN = 1024  # free slots before compacting (and only when more than half are free)

_CountKey = tuple[LabelSelector, str]


class PodIndex:
    def __init__(self) -> None:
        self._cap = 0
        self._top = 0  # slots in use are below this
        self._slot: dict[str, int] = {}  # pod key -> slot (private to the writer)
        self._free_count = 0  # slots of removed pods (never reused: see _writable)
        self.node_row = np.full(0, FREE, np.int32)
        self.namespace = np.zeros(0, np.int32)
        self.terminating = np.zeros(0, np.bool_)
        self._labels: dict[str, Int32Array] = {}
        self._ns_ids: dict[str, int] = {}  # shared, append-only
        self._value_ids: dict[str, dict[str, int]] = {}  # shared, append-only
        self._shared = False  # arrays shared with a snapshot: copy before writing
        self.version = 0  # moves on every write
        # kept counts: (selector, namespace) -> [per-node counts, owned (False: a snapshot shares it)]
        self._kept: dict[_CountKey, list[Any]] = {}
        # counts snapshots computed: key -> (the version they were computed at, counts)
        self._handback: dict[_CountKey, tuple[int, IntArray]] = {}
        self._alive: tuple[int, BoolArray] | None = None  # (version, live-slot mask)
        # affinity term entries: (slot, term id, kind, weight), append-only like the slot columns
        self._tn = 0
        self._t_slot = np.zeros(0, np.int32)
        self._t_term = np.zeros(0, np.int32)
        self._t_kind = np.zeros(0, np.int8)
        self._t_weight = np.zeros(0, np.int64)
        self.terms: list[AffinityTerm] = []  # term id -> term; shared, append-only
        self._term_ids: dict[AffinityTerm, int] = {}  # shared, append-only
        # what a plugin learnt per term id (InterPodAffinity: does term i match a pod of this
        # shape?); valid as long as term ids are, so shared by snapshots, copied by what-if views
        self.match_cache: dict[tuple[Any, ...], BoolArray] = {}
        self.namespace_selectors = False  # does any term carry a non-empty namespaceSelector?

    # ---------------------------------------------------------------- sharing
    def share(self) -> PodIndex:
        """A read-only view for a snapshot; the next write here copies the arrays first."""
        view = PodIndex.__new__(PodIndex)
        view.__dict__.update(self.__dict__)
        view._slot = {}  # a snapshot never writes
        view._kept = {k: [entry[0], False] for k, entry in self._kept.items()}
        for entry in self._kept.values():
            entry[1] = False
        view._handback = self._handback  # the same dict: what the snapshot computes comes back here
        self._shared = True
        return view

    def private_copy(self) -> PodIndex:
        """A writable copy for a what-if table (the writer's slot map copied, arrays copy-on-write)."""
        view = PodIndex.__new__(PodIndex)
        view.__dict__.update(self.__dict__)
        view._slot = dict(self._slot)
        # a what-if table appends to its own columns (the table appends to the shared ones)
        view.node_row, view.namespace = self.node_row.copy(), self.namespace.copy()
        view.terminating = self.terminating.copy()
        view._labels = {k: c.copy() for k, c in self._labels.items()}
        view._ns_ids = dict(self._ns_ids)
        view._value_ids = {k: dict(v) for k, v in self._value_ids.items()}
        tn = self._tn
        view._t_slot, view._t_term = self._t_slot[:tn].copy(), self._t_term[:tn].copy()
        view._t_kind, view._t_weight = self._t_kind[:tn].copy(), self._t_weight[:tn].copy()
        view.terms = list(self.terms)
        view._term_ids = dict(self._term_ids)
        view.match_cache = dict(self.match_cache)  # the ids so far mean the same terms
        view._kept = {k: [entry[0], False] for k, entry in self._kept.items()}
        for entry in self._kept.values():
            entry[1] = False
        view._handback = {}
        view._shared = False
        return view

    def _writable(self) -> None:
        """Only node_row is ever rewritten (a pod removed or its node's row moved); the other
        columns are append-only: a snapshot reads slots below its own top, which never change."""
        if self._shared:
            self.node_row = self.node_row.copy()
            self._shared = False

    def _grow(self, need: int) -> None:
        if need <= self._cap:
            return
        cap = max(64, self._cap * 2, need)

        def grow(a: np.ndarray, fill: Any) -> np.ndarray:
            out = np.full(cap, fill, a.dtype)
            out[: self._top] = a[: self._top]
            return out

        self.node_row = grow(self.node_row, FREE)
        self.namespace = grow(self.namespace, 0)
        self.terminating = grow(self.terminating, False)
        self._labels = {k: grow(c, -1) for k, c in self._labels.items()}
        self._cap = cap
        self._shared = False

    def _compact(self) -> None:
        """Drop the free slots (more than half of them): new arrays, so snapshots keep theirs."""
        live = np.flatnonzero(self.node_row[: self._top] != FREE)
        old_slot = {slot: key for key, slot in self._slot.items()}
        self.node_row = self.node_row[live].copy()
        self.namespace = self.namespace[live].copy()
        self.terminating = self.terminating[live].copy()
        self._labels = {k: c[live].copy() for k, c in self._labels.items()}
        self._slot = {old_slot[int(old)]: new for new, old in enumerate(live)}
        tn = self._tn
        new_slot = np.full(self._top, FREE, np.int64)
        new_slot[live] = np.arange(len(live))
        kept = new_slot[self._t_slot[:tn]] != FREE
        self._t_slot = new_slot[self._t_slot[:tn][kept]].astype(np.int32)
        self._t_term = self._t_term[:tn][kept].copy()
        self._t_kind = self._t_kind[:tn][kept].copy()
        self._t_weight = self._t_weight[:tn][kept].copy()
        self._tn = len(self._t_slot)
        self._top = self._cap = len(live)
        self._free_count = 0
        self._shared = False
        self._alive = None
        self._renumber()

    def _renumber(self) -> None:
        """Keep only the label values, label keys, namespaces and affinity terms that live slots use,
        renumbered densely. Pods carry values unique to them or their owner (a Job's controller-uid,
        a StatefulSet's pod-name, each rollout's pod-template-hash), so a vocabulary that only grew
        would hold one entry per pod ever placed. New dicts and columns: snapshots keep theirs."""
        labels: dict[str, Int32Array] = {}
        value_ids: dict[str, dict[str, int]] = {}
        for key, col in self._labels.items():
            used = _used_ids(col[col >= 0])
            if used.size == 0:  # no live pod carries this key any more
                continue
            labels[key] = _remapped(col, used)
            names = dict.fromkeys(range(used.size), "")
            wanted = {int(old): new for new, old in enumerate(used)}
            for value, old in self._value_ids[key].items():
                new = wanted.get(old)
                if new is not None:
                    names[new] = value
            value_ids[key] = {value: new for new, value in names.items()}
        self._labels, self._value_ids = labels, value_ids
        used_ns = _used_ids(self.namespace)
        ns_of = {old: name for name, old in self._ns_ids.items()}
        self.namespace = _remapped(self.namespace, used_ns)
        self._ns_ids = {ns_of[int(old)]: new for new, old in enumerate(used_ns)}
        used_terms = _used_ids(self._t_term)
        self._t_term = _remapped(self._t_term, used_terms)
        self.terms = [self.terms[int(old)] for old in used_terms]
        self._term_ids = {term: new for new, term in enumerate(self.terms)}
        self.match_cache = {}  # its arrays are indexed by the old term ids
        self.namespace_selectors = any(t.namespace_selector is not None and t.namespace_selector.requirements
                                       for t in self.terms)

    # ---------------------------------------------------------------- kept counts
    def _adopt(self) -> None:
        """Take the counts snapshots computed at this very version (before changing anything)."""
        if self._handback:
            for key, (version, counts) in list(self._handback.items()):
                if version == self.version and key not in self._kept:
                    self._kept[key] = [counts, False]
            self._handback.clear()
            if len(self._kept) > _MAX_KEPT:
                self._kept.clear()

    def _move_counts(self, pod: PodInfo, row: int, delta: int) -> None:
        labels = None
        for key, entry in list(self._kept.items()):
            selector, namespace = key
            counts = entry[0]
            if row >= counts.size:  # a node added since: recount when asked
                del self._kept[key]
                continue
            if pod.namespace != namespace or pod.terminating:
                continue
            if labels is None:
                labels = dict(pod.labels)
            if not selector.matches(labels):
                continue
            if not entry[1]:
                counts = entry[0] = counts.copy()
                entry[1] = True
            counts[row] += delta

    def forget_counts(self) -> None:
        """Rows moved (a node removed): kept counts no longer line up."""
        self._kept.clear()
        self._handback.clear()
        self.version += 1

    # ---------------------------------------------------------------- writing
    def add(self, pod: PodInfo, row: int) -> None:
        self._adopt()
        self.version += 1
        if pod.key in self._slot:  # re-added: its old slot is freed, it gets a fresh one
            self._free_slot(self._slot.pop(pod.key))
        self._grow(self._top + 1)
        slot = self._top
        self._top += 1
        self._slot[pod.key] = slot
        # no copy first (_writable): a new slot is at or above every snapshot's top, where none reads.
        # Copying node_row here cost O(pods) on every pod assumed.
        self.node_row[slot] = row
        self.namespace[slot] = self._ns_ids.setdefault(pod.namespace, len(self._ns_ids))
        self.terminating[slot] = pod.terminating
        for key, value in pod.labels:
            col = self._labels.get(key)
            if col is None:
                col = np.full(self._cap, -1, np.int32)
                self._labels = {**self._labels, key: col}
            ids = self._value_ids.setdefault(key, {})
            vid = ids.get(value)
            if vid is None:
                vid = ids[value] = len(ids)
            col[slot] = vid
        pa = pod.pod_affinity
        if pa is not None:
            for kind, weighted in (
                (REQUIRED_AFFINITY, [(1, t) for t in pa.required_affinity]),
                (REQUIRED_ANTI_AFFINITY, [(1, t) for t in pa.required_anti_affinity]),
                (PREFERRED_AFFINITY, [(w.weight, w.term) for w in pa.preferred_affinity]),
                (PREFERRED_ANTI_AFFINITY, [(w.weight, w.term) for w in pa.preferred_anti_affinity]),
            ):
                for weight, term in weighted:
                    self._add_entry(slot, term, kind, weight)
        if self._kept:
            self._move_counts(pod, row, +1)

    def _add_entry(self, slot: int, term: AffinityTerm, kind: int, weight: int) -> None:
        tid = self._term_ids.get(term)
        if tid is None:
            tid = self._term_ids[term] = len(self.terms)
            self.terms.append(term)
            if term.namespace_selector is not None and term.namespace_selector.requirements:
                self.namespace_selectors = True
        i = self._tn
        if i >= len(self._t_slot):  # new arrays: snapshots keep the old ones
            size = max(64, 2 * len(self._t_slot))
            self._t_slot = _resized(self._t_slot, size, i)
            self._t_term = _resized(self._t_term, size, i)
            self._t_kind = _resized(self._t_kind, size, i)
            self._t_weight = _resized(self._t_weight, size, i)
        self._t_slot[i], self._t_term[i], self._t_kind[i], self._t_weight[i] = slot, tid, kind, weight
        self._tn += 1

    def _free_slot(self, slot: int) -> None:
        self._writable()
        self.node_row[slot] = FREE
        self._free_count += 1

    def remove(self, key: str, pod: PodInfo | None = None) -> None:
        """Forget pod `key` (its PodInfo, to move the kept counts; without it they are dropped)."""
        self._adopt()
        slot = self._slot.pop(key, None)
        if slot is None:
            return
        self.version += 1
        row = int(self.node_row[slot])
        self._free_slot(slot)
        if self._kept:
            if pod is None:
                self._kept.clear()
            else:
                self._move_counts(pod, row, -1)
        if self._free_count > COMPACT_MIN and self._free_count * 2 > self._top:
            self._compact()

    def move_node(self, keys: Sequence[str], row: int) -> None:
        """The pods `keys` now sit on node row `row` (the table moved a node's row)."""
        self.forget_counts()
        self._writable()
        for key in keys:
            slot = self._slot.get(key)
            if slot is not None:
                self.node_row[slot] = row

    # ---------------------------------------------------------------- reading
    def __len__(self) -> int:
        return int((self.node_row[: self._top] != FREE).sum())

    @property
    def slots(self) -> int:
        """Slots in use, live or free: the length of every per-slot array below."""
        return self._top

    @property
    def node_rows(self) -> Int32Array:
        """Node row of each slot, FREE (-1) for a removed pod."""
        return self.node_row[: self._top]

    @property
    def alive(self) -> BoolArray:
        """Slots of pods still assigned (kept until the next write)."""
        if self._alive is None or self._alive[0] != self.version:
            self._alive = (self.version, self.node_row[: self._top] != FREE)
        return self._alive[1]

    def namespace_mask(self, names: Iterable[str]) -> BoolArray:
        """Slots whose pod is in one of `names`."""
        ids = [i for i in (self._ns_ids.get(n) for n in names) if i is not None]
        col = self.namespace[: self._top]
        if not ids:
            return np.zeros(self._top, np.bool_)
        if len(ids) == 1:
            return col == ids[0]
        return _lookup_table(ids, len(self._ns_ids))[col]

    def term_entries(self) -> tuple[Int32Array, Int32Array, npt.NDArray[np.int8], IntArray]:
        """(slot, term id, kind, weight) of every affinity term that pods carry (free slots too:
        check `alive[slot]`); `terms[term id]` is the term."""
        tn = self._tn
        return self._t_slot[:tn], self._t_term[:tn], self._t_kind[:tn], self._t_weight[:tn]

    def requirement_mask(self, r: Requirement) -> BoolArray:
        """Slots whose pod labels satisfy `r` (In, NotIn, Exists, DoesNotExist)."""
        top = self._top
        col = self._labels.get(r.key)
        if col is None:  # no pod has the key
            return np.ones(top, np.bool_) if r.operator in ("NotIn", "DoesNotExist") else np.zeros(top, np.bool_)
        values = col[:top]
        if r.operator == "Exists":
            return values >= 0
        if r.operator == "DoesNotExist":
            return values < 0
        if r.operator not in ("In", "NotIn"):  # Gt/Lt do not occur in label selectors; refuse rather than guess
            raise ValueError(f"operator {r.operator!r} in a pod label selector")
        ids = self._value_ids.get(r.key, {})
        wanted = [ids[v] for v in r.values if v in ids]
        if len(wanted) == 1:  # the usual `app=web`: one comparison, much cheaper than isin
            hit = values == wanted[0]
        elif wanted:
            hit = _lookup_table(wanted, len(ids))[values]  # -1 (key absent) reads the False past the end
        else:
            hit = np.zeros(top, np.bool_)
        return hit if r.operator == "In" else ~hit

    def selector_mask(self, selector: LabelSelector | None) -> BoolArray:
        """Which slots' labels match `selector` (free slots included; callers mask them out).
        None selects nothing (an affinity term without labelSelector), the empty selector all."""
        top = self._top
        if selector is None:
            return np.zeros(top, np.bool_)
        mask = np.ones(top, np.bool_)
        for r in selector.requirements:
            mask &= self.requirement_mask(r)
        return mask

    def count_matching(self, selector: LabelSelector, namespace: str, rows: int) -> IntArray:
        """Per node row (0..rows-1): the live (not terminating) pods of `namespace` that match.
        The result is shared: read it, do not change it."""
        key = (selector, namespace)
        entry = self._kept.get(key)
        if entry is not None and entry[0].size == rows:
            kept: IntArray = entry[0]
            return kept
        counts = self._count(selector, namespace, rows)
        if self._slot or not self._top:  # the table itself (it has the slot map): keep them here
            self._kept[key] = [counts, True]
            if len(self._kept) > _MAX_KEPT:
                self._kept.clear()
        else:  # a snapshot: keep them, and offer them to the table it came from
            self._kept[key] = [counts, False]
            self._handback[key] = (self.version, counts)
        return counts

    def _count(self, selector: LabelSelector, namespace: str, rows: int) -> IntArray:
        top = self._top
        ns = self._ns_ids.get(namespace)
        if ns is None or top == 0:
            return np.zeros(rows, np.int64)
        live = self.node_row[:top]
        mask = (live != FREE) & (self.namespace[:top] == ns) & ~self.terminating[:top]
        mask &= self.selector_mask(selector)
        return np.bincount(live[mask], minlength=rows).astype(np.int64)[:rows]

    def labels_known(self) -> Mapping[str, Mapping[str, int]]:
        return self._value_ids


def _used_ids(ids: npt.NDArray[np.int32]) -> npt.NDArray[np.intp]:
    """The distinct ids (all >= 0) in `ids`, sorted: np.unique's answer, without np.unique, whose
    first call imports numpy.ma (a step of 1-2 MiB thousands of pods into a run, or ~30 ms of
    every start when imported up front)."""
    return np.flatnonzero(np.bincount(ids))


def _remapped(ids: npt.NDArray[np.int32], used: npt.NDArray[Any]) -> npt.NDArray[np.int32]:
    """`ids` (-1 for none) with each id in the sorted `used` replaced by its position there."""
    if used.size == 0:
        return ids.copy()
    table = np.full(int(used[-1]) + 1, -1, np.int32)
    table[used] = np.arange(used.size, dtype=np.int32)
    return np.where(ids >= 0, table[np.maximum(ids, 0)], -1).astype(np.int32)


def _lookup_table(ids: Sequence[int], size: int) -> BoolArray:
    """True at `ids` among 0..size-1, plus one False at the end that an id of -1 reads: indexing
    an id column with it is np.isin without the sort."""
    table = np.zeros(size + 1, np.bool_)
    table[list(ids)] = True
    return table


def _resized(a: np.ndarray, size: int, used: int) -> Any:
    out = np.zeros(size, a.dtype)
    out[:used] = a[:used]
    return out
