"""PodColumns: the assigned pods as columns, so "which pods match this selector, and where are
they?" is a few numpy operations instead of a Python loop over every pod.

kube-scheduler answers inter-pod affinity by walking every pod of every node in PreFilter and
PreScore. Here each assigned pod has a slot: the row of its node, its namespace id, and one value
id per label key (-1 where the pod lacks the key), as NodeTable keeps node labels. A label selector
is then a comparison per requirement over all slots, and `np.bincount` over the node rows of the
matching slots gives the count per node. The affinity terms that pods carry are kept as entries
(slot, term id, kind, weight), so the terms of existing pods ("does any existing pod's
anti-affinity reject the new pod?") are judged once per distinct term, not once per pod.

Slots are append-only and a snapshot bounds itself by the slot count it was taken at. A removal
stamps the slot with a removal number, and a snapshot, which remembers the last number it saw,
still counts pods removed after it: so the owning table writes in place, with no copy per cycle
(only a node's removal, which moves rows, copies the node column first). Any other table (a what-if
view) copies everything on its first write. Dead slots are dropped by compaction, into new arrays,
when they outnumber the live ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework.types import AffinityTerm, LabelSelector, PodInfo, Requirement

BoolArray = npt.NDArray[np.bool_]
Int32Array = npt.NDArray[np.int32]

# kinds of the term entries
REQUIRED_AFFINITY = 0
REQUIRED_ANTI_AFFINITY = 1
PREFERRED_AFFINITY = 2
PREFERRED_ANTI_AFFINITY = 3

_COMPACT_MIN = 1024
_NEVER = np.iinfo(np.int64).max


class PodColumns:
    """Pods as slots. Read it through a NodeTable's `pod_columns()`; NodeTable writes it."""

    def __init__(self) -> None:
        self._n = 0
        self._node = np.zeros(0, np.int32)  # node row per slot, -1: its node is gone
        self._removed_at = np.zeros(0, np.int64)  # removal number of the slot's pod, _NEVER while live
        self._removals = 0  # removals so far; a snapshot keeps the count it was taken at
        self._ns = np.zeros(0, np.int32)
        self._labels: dict[str, Int32Array] = {}
        self._value_ids: dict[str, dict[str, int]] = {}  # shared, append-only
        self._ns_ids: dict[str, int] = {}  # shared, append-only
        self._slot: dict[str, int] = {}  # pod key -> slot (the writer's only)
        self._live = 0
        # term entries: (slot, term id, kind, weight)
        self._tn = 0
        self._t_slot = np.zeros(0, np.int32)
        self._t_term = np.zeros(0, np.int32)
        self._t_kind = np.zeros(0, np.int8)
        self._t_weight = np.zeros(0, np.int64)
        self.terms: list[AffinityTerm] = []  # shared, append-only
        self._term_ids: dict[AffinityTerm, int] = {}  # shared, append-only
        self._node_shared = False  # a snapshot holds _node: copy before writing inside its bound
        self._owner = True  # False: a view's copy of another table's columns, copied on first write
        self._alive: BoolArray | None = None  # kept until the next write
        # term id -> does it match a pod of this (namespace, labels, namespace labels)? Shared by
        # the views of one table, as the term ids are (append-only); a view that copies starts anew.
        self.match_cache: dict[tuple[Any, ...], BoolArray] = {}
        self.namespace_selectors = False  # does any term carry a non-empty namespaceSelector?

    # ------------------------------------------------------------ reading
    def __len__(self) -> int:
        """Number of slots (live or dead)."""
        return self._n

    @property
    def live(self) -> int:
        return self._live

    @property
    def node_rows(self) -> Int32Array:  # dead slots too: mask with `alive`
        """Node row of each slot, -1 for a pod that is gone."""
        return self._node[: self._n]

    @property
    def alive(self) -> BoolArray:
        """Slots of pods still assigned."""
        if self._alive is None:
            n = self._n
            self._alive = (self._node[:n] >= 0) & (self._removed_at[:n] > self._removals)
        return self._alive

    @property
    def namespace_ids(self) -> Int32Array:
        return self._ns[: self._n]

    def namespace_id(self, name: str) -> int | None:
        return self._ns_ids.get(name)

    def namespace_mask(self, names: Iterable[str]) -> BoolArray:
        ids = [i for i in (self._ns_ids.get(n) for n in names) if i is not None]
        col = self._ns[: self._n]
        if not ids:
            return np.zeros(self._n, np.bool_)
        return col == ids[0] if len(ids) == 1 else np.isin(col, ids)

    def label_column(self, key: str) -> Int32Array | None:
        col = self._labels.get(key)
        return col[: self._n] if col is not None else None

    def requirement_mask(self, r: Requirement) -> BoolArray:
        """Slots whose pod labels satisfy `r` (In, NotIn, Exists, DoesNotExist)."""
        n = self._n
        col = self.label_column(r.key)
        if r.operator in ("In", "NotIn"):
            known = self._value_ids.get(r.key, {})
            ids = [i for i in (known.get(v) for v in r.values) if i is not None]
            if col is None or not ids:
                hit = np.zeros(n, np.bool_)
            else:
                hit = (col == ids[0]) if len(ids) == 1 else np.isin(col, ids)
            return hit if r.operator == "In" else ~hit
        if r.operator == "Exists":
            return col >= 0 if col is not None else np.zeros(n, np.bool_)
        if r.operator == "DoesNotExist":
            return col < 0 if col is not None else np.ones(n, np.bool_)
        raise ValueError(f"operator {r.operator!r} is not valid in a label selector")

    def selector_mask(self, selector: LabelSelector | None) -> BoolArray:
        """Slots whose pods `selector` selects (None selects none, the empty selector all)."""
        if selector is None:
            return np.zeros(self._n, np.bool_)
        mask = np.ones(self._n, np.bool_)
        for r in selector.requirements:
            mask &= self.requirement_mask(r)
        return mask

    def term_entries(self) -> tuple[Int32Array, Int32Array, npt.NDArray[np.int8], npt.NDArray[np.int64]]:
        """(slot, term id, kind, weight) of every affinity term that pods carry (dead slots too:
        check `alive[slot]`)."""
        tn = self._tn
        return self._t_slot[:tn], self._t_term[:tn], self._t_kind[:tn], self._t_weight[:tn]

    # ------------------------------------------------------------ sharing
    def frozen_view(self) -> PodColumns:
        """What a snapshot holds: the same arrays, bounded by the current slot counts."""
        view = PodColumns.__new__(PodColumns)
        view.__dict__.update(self.__dict__)
        view._owner = False
        view._alive = None
        self._node_shared = True
        return view

    def _own(self, in_bounds: bool) -> None:
        """Before a write: a view takes private copies of everything it may change; the owner
        copies the node column only for a write inside a snapshot's bound (`in_bounds`)."""
        self._alive = None
        if self._owner:
            if in_bounds and self._node_shared:
                self._node = self._node.copy()
                self._node_shared = False
            return
        n, tn = self._n, self._tn
        self._node = self._node[:n].copy()
        self._removed_at = self._removed_at[:n].copy()
        self._ns = self._ns[:n].copy()
        self._labels = {k: c[:n].copy() for k, c in self._labels.items()}
        self._value_ids = {k: dict(v) for k, v in self._value_ids.items()}
        self._ns_ids = dict(self._ns_ids)
        self._slot = dict(self._slot)
        self._t_slot, self._t_term = self._t_slot[:tn].copy(), self._t_term[:tn].copy()
        self._t_kind, self._t_weight = self._t_kind[:tn].copy(), self._t_weight[:tn].copy()
        self.terms = list(self.terms)
        self._term_ids = dict(self._term_ids)
        self.match_cache = {}
        self._owner = True
        self._node_shared = False

    # ------------------------------------------------------------ writing (NodeTable calls these)
    def add(self, row: int, pod: PodInfo) -> None:
        if pod.key in self._slot:
            self.remove(pod.key)
        self._own(False)
        slot = self._n
        if slot >= len(self._node):
            self._grow(max(64, 2 * len(self._node)))
        self._node[slot] = row
        self._removed_at[slot] = _NEVER
        ns = self._ns_ids.get(pod.namespace)
        if ns is None:
            ns = self._ns_ids[pod.namespace] = len(self._ns_ids)
        self._ns[slot] = ns
        for key, value in pod.labels:
            col = self._labels.get(key)
            if col is None:
                col = np.full(len(self._node), -1, np.int32)
                self._labels = {**self._labels, key: col}  # a new dict: snapshots keep theirs
                self._value_ids.setdefault(key, {})
            ids = self._value_ids[key]
            vid = ids.get(value)
            if vid is None:
                vid = ids[value] = len(ids)
            col[slot] = vid
        self._n += 1
        self._live += 1
        self._slot[pod.key] = slot
        pa = pod.pod_affinity
        if pa is not None:
            for kind, terms in (
                (REQUIRED_AFFINITY, [(1, t) for t in pa.required_affinity]),
                (REQUIRED_ANTI_AFFINITY, [(1, t) for t in pa.required_anti_affinity]),
                (PREFERRED_AFFINITY, [(w.weight, w.term) for w in pa.preferred_affinity]),
                (PREFERRED_ANTI_AFFINITY, [(w.weight, w.term) for w in pa.preferred_anti_affinity]),
            ):
                for weight, term in terms:
                    self._add_entry(slot, term, kind, weight)

    def _add_entry(self, slot: int, term: AffinityTerm, kind: int, weight: int) -> None:
        tid = self._term_ids.get(term)
        if tid is None:
            tid = self._term_ids[term] = len(self.terms)
            self.terms.append(term)
            if term.namespace_selector is not None and term.namespace_selector.requirements:
                self.namespace_selectors = True
        i = self._tn
        if i >= len(self._t_slot):
            size = max(64, 2 * len(self._t_slot))
            self._t_slot = _resized(self._t_slot, size, i)
            self._t_term = _resized(self._t_term, size, i)
            self._t_kind = _resized(self._t_kind, size, i)
            self._t_weight = _resized(self._t_weight, size, i)
        self._t_slot[i], self._t_term[i], self._t_kind[i], self._t_weight[i] = slot, tid, kind, weight
        self._tn += 1

    def remove(self, pod_key: str) -> None:
        slot = self._slot.get(pod_key)
        if slot is None:
            return
        self._own(False)  # no copy: snapshots read the removal number against their own
        del self._slot[pod_key]
        self._removals += 1
        self._removed_at[slot] = self._removals
        self._live -= 1
        if self._n - self._live > max(_COMPACT_MIN, self._live):
            self._compact()

    def move_rows(self, gone: int, moved_from: int) -> None:
        """Node row `gone` was removed and row `moved_from` took its place (NodeTable keeps rows
        dense): pods of `gone` leave, pods of `moved_from` follow their node."""
        alive = self.alive
        self._own(True)
        node = self._node[: self._n]
        leaving = node == gone
        for key in [k for k, s in self._slot.items() if leaving[s]]:
            del self._slot[key]
        self._live -= int((leaving & alive).sum())
        node[leaving] = -1
        if moved_from != gone:
            node[node == moved_from] = gone

    def _grow(self, size: int) -> None:
        n = self._n
        self._node = _resized(self._node, size, n)
        self._removed_at = _resized(self._removed_at, size, n, fill=_NEVER)
        self._ns = _resized(self._ns, size, n)
        self._labels = {k: _resized(c, size, n, fill=-1) for k, c in self._labels.items()}
        self._node_shared = False

    def _compact(self) -> None:
        """Drop dead slots into new arrays (snapshots keep the old ones)."""
        tn = self._tn
        alive = self.alive
        new_slot = np.cumsum(alive, dtype=np.int64) - 1
        keep = np.flatnonzero(alive)
        self._node = self._node[keep].copy()
        self._removed_at = np.full(len(keep), _NEVER, np.int64)
        self._ns = self._ns[keep].copy()
        self._labels = {k: c[keep].copy() for k, c in self._labels.items()}
        self._slot = {k: int(new_slot[s]) for k, s in self._slot.items()}
        t_alive = alive[self._t_slot[:tn]]
        self._t_slot = new_slot[self._t_slot[:tn][t_alive]].astype(np.int32)
        self._t_term = self._t_term[:tn][t_alive].copy()
        self._t_kind = self._t_kind[:tn][t_alive].copy()
        self._t_weight = self._t_weight[:tn][t_alive].copy()
        self._n = len(keep)
        self._tn = len(self._t_slot)
        self._node_shared = False
        self._alive = None


def _resized(a: np.ndarray, size: int, used: int, fill: Any = 0) -> Any:
    out = np.full(size, fill, a.dtype)
    out[:used] = a[:used]
    return out
