"""PodIndex: the assigned pods of a NodeTable as columns, so "how many pods on each node match this
label selector in this namespace" is a few numpy operations, not a Python loop over pods.

One slot per pod: the row of its node, its namespace id, whether it is terminating, and for every
label key any pod carries, the id of its value (-1 where the pod lacks the key). A selector becomes
a boolean mask over slots (In: the value id is one of the wanted ones; Exists: the id is not -1 ...),
and np.bincount over the matching slots' node rows gives the count per node. kube-scheduler loops
over each NodeInfo's pods instead (podtopologyspread's countPodsMatchSelector).

The NodeTable keeps one index and changes it as pods come and go; snapshots share its arrays
copy-on-write, as they share the table's. The value and namespace vocabularies only grow, so a
snapshot can share them too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework.types import LabelSelector, PodInfo

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Int32Array = npt.NDArray[np.int32]

FREE = -1  # node row of an empty slot


class PodIndex:
    def __init__(self) -> None:
        self._cap = 0
        self._top = 0  # slots in use are below this
        self._slot: dict[str, int] = {}  # pod key -> slot (private to the writer)
        self._free: list[int] = []
        self.node_row = np.full(0, FREE, np.int32)
        self.namespace = np.zeros(0, np.int32)
        self.terminating = np.zeros(0, np.bool_)
        self._labels: dict[str, Int32Array] = {}
        self._ns_ids: dict[str, int] = {}  # shared, append-only
        self._value_ids: dict[str, dict[str, int]] = {}  # shared, append-only
        self._shared = False  # arrays shared with a snapshot: copy before writing

    # ---------------------------------------------------------------- sharing
    def share(self) -> PodIndex:
        """A read-only view for a snapshot; the next write here copies the arrays first."""
        view = PodIndex.__new__(PodIndex)
        view.__dict__.update(self.__dict__)
        view._slot, view._free = {}, []  # a snapshot never writes
        self._shared = True
        return view

    def private_copy(self) -> PodIndex:
        """A writable copy for a what-if table (the writer's slot map copied, arrays copy-on-write)."""
        view = PodIndex.__new__(PodIndex)
        view.__dict__.update(self.__dict__)
        view._slot, view._free = dict(self._slot), list(self._free)
        view._ns_ids = dict(self._ns_ids)
        view._value_ids = {k: dict(v) for k, v in self._value_ids.items()}
        view._shared = self._shared = True
        return view

    def _writable(self) -> None:
        if self._shared:
            self.node_row = self.node_row.copy()
            self.namespace = self.namespace.copy()
            self.terminating = self.terminating.copy()
            self._labels = {k: c.copy() for k, c in self._labels.items()}
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

    # ---------------------------------------------------------------- writing
    def add(self, pod: PodInfo, row: int) -> None:
        self._writable()
        slot = self._slot.get(pod.key)
        if slot is None:
            if self._free:
                slot = self._free.pop()
            else:
                self._grow(self._top + 1)
                slot = self._top
                self._top += 1
            self._slot[pod.key] = slot
        self.node_row[slot] = row
        ns = self._ns_ids.setdefault(pod.namespace, len(self._ns_ids))
        self.namespace[slot] = ns
        self.terminating[slot] = pod.terminating
        for existing in self._labels.values():
            existing[slot] = -1
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

    def remove(self, key: str) -> None:
        slot = self._slot.pop(key, None)
        if slot is None:
            return
        self._writable()
        self.node_row[slot] = FREE
        self._free.append(slot)

    def move_node(self, keys: Sequence[str], row: int) -> None:
        """The pods `keys` now sit on node row `row` (the table moved a node's row)."""
        self._writable()
        for key in keys:
            slot = self._slot.get(key)
            if slot is not None:
                self.node_row[slot] = row

    # ---------------------------------------------------------------- reading
    def __len__(self) -> int:
        return int((self.node_row[: self._top] != FREE).sum())

    def selector_mask(self, selector: LabelSelector) -> BoolArray:
        """Which slots' labels match `selector` (free slots included; callers mask them out)."""
        top = self._top
        mask = np.ones(top, np.bool_)
        for r in selector.requirements:
            col = self._labels.get(r.key)
            if col is None:  # no pod has the key
                if r.operator in ("In", "Exists", "Gt", "Lt"):
                    return np.zeros(top, np.bool_)
                continue
            values = col[:top]
            if r.operator == "Exists":
                mask &= values >= 0
            elif r.operator == "DoesNotExist":
                mask &= values < 0
            else:
                ids = self._value_ids.get(r.key, {})
                wanted = [ids[v] for v in r.values if v in ids]
                if len(wanted) == 1:  # the usual `app=web`: one comparison, much cheaper than isin
                    hit = values == wanted[0]
                elif wanted:
                    hit = np.isin(values, np.array(wanted, np.int32))
                else:
                    hit = np.zeros(top, np.bool_)
                if r.operator == "In":
                    mask &= hit
                elif r.operator == "NotIn":
                    mask &= ~hit
                else:  # Gt/Lt do not occur in label selectors; refuse rather than guess
                    raise ValueError(f"operator {r.operator!r} in a pod label selector")
        return mask

    def count_matching(self, selector: LabelSelector, namespace: str, rows: int) -> IntArray:
        """Per node row (0..rows-1): the live (not terminating) pods of `namespace` that match."""
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
