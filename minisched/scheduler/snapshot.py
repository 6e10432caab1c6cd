"""NodeTable: the cluster's nodes as numpy arrays, one row per node, so plugins judge all nodes at once.

kube-scheduler keeps a NodeInfo struct per node and asks each plugin about one node at a time. Here
each fact is a column: allocatable and requested resources (a matrix, cpu in millicores), label values
(one int32 column of value ids per label key, -1 where a node lacks the key), taints (a matrix of the
taint's position in the node's list, for every distinct (key, value, effect)), host ports in use
(counts per distinct (ip, protocol, port)) and images (presence per distinct image name). A filter is
then a handful of array comparisons over every node, whatever the number of nodes.

The scheduler cache owns one NodeTable and changes it incrementally (add_node, update_node,
remove_node, add_pod, remove_pod). Each scheduling cycle takes `snapshot()`: a frozen NodeTable that
shares the arrays, copy-on-write, so a cycle costs one copy of the arrays that changed since the last
one (usually just the requested resources). Vocabularies (label values, taints, ports, images) only
ever grow, so a snapshot can share them and bounds itself by its own arrays' shapes.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.pod_index import PodIndex
from minisched.scheduler.pod_info import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    LabelSelector,
    PodInfo,
    is_scalar_resource,
    parse_int64,
    resource_amount,
)

Object = dict[str, Any]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

BASE_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)
NO_TAINT = np.int16(np.iinfo(np.int16).max)  # position of a taint a node does not have

_POD_LOG_LIMIT = 4096

# groups of arrays that are copied together on write
_GROUPS = ("rows", "alloc", "req", "labels", "taints", "ports", "images", "pods")


class FrozenSnapshotError(RuntimeError):
    pass


class NodeTable:
    """Nodes as rows. Public attributes are read-only by convention; change it through the methods."""

    # pod changes remembered for nodes_changed_since (then the newest half is kept); an owner may
    # set a smaller bound on its table (SchedulerApp's buffers={"pod-change-log": n})
    pod_log_limit = _POD_LOG_LIMIT

    def __init__(self) -> None:
        self.frozen = False
        self._n = 0
        self._cap = 0
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._nodes: list[Object] = []
        self.resource_names: list[str] = list(BASE_RESOURCES)
        self._resource_col: dict[str, int] = {r: i for i, r in enumerate(BASE_RESOURCES)}
        self._alloc = np.zeros((0, len(BASE_RESOURCES)), np.int64)
        self._unschedulable = np.zeros(0, np.bool_)
        self._req = np.zeros((0, len(BASE_RESOURCES)), np.int64)  # the "pods" column counts pods
        self._nonzero = np.zeros((0, 2), np.int64)  # cpu, memory with kube's defaults for scoring
        self._label_cols: dict[str, npt.NDArray[np.int32]] = {}
        self._label_ids: dict[str, dict[str, int]] = {}  # shared, append-only
        self._label_values: dict[str, list[str]] = {}  # shared, append-only
        self._taint_ids: dict[tuple[str, str, str], int] = {}  # shared, append-only
        self.taint_list: list[tuple[str, str, str]] = []
        self._taint_pos = np.zeros((0, 0), np.int16)
        self._port_ids: dict[tuple[str, str, int], int] = {}
        self.port_list: list[tuple[str, str, int]] = []
        self._ports = np.zeros((0, 0), np.int32)
        self._image_ids: dict[str, int] = {}
        self.image_list: list[str] = []
        self._image_size = np.zeros(0, np.int64)
        # nodes holding each image, kept as nodes come and go: as in kube's cache, an image's size
        # is the one its first holder reported, until no node holds it any more
        self._image_holders = np.zeros(0, np.int64)
        self._images = np.zeros((0, 0), np.bool_)
        self._image_counts: IntArray | None = None  # nodes holding each image; None: recount
        self._pods: list[dict[str, PodInfo]] = []
        # the same pods as columns (labels, namespace, affinity terms), for counting label-selector
        # matches per node with numpy; None in a subset view (a few rows: counted one by one) until
        # a plugin asks for it (indexed_pods)
        self.pod_index: PodIndex | None = PodIndex()
        self._orphans: dict[str, dict[str, PodInfo]] = {}  # pods seen before their node
        self._shared: set[str] = set()
        self._numeric_cache: dict[str, tuple[int, IntArray, BoolArray]] = {}
        # Change tracking, so a scheduling cycle can reuse work from an earlier one: node_version
        # moves on any node change (rows, labels, taints, allocatable, images); pod_version on any
        # pod change, with the node it touched logged. The log only grows (trimming replaces it),
        # so snapshots share it and read the entries up to their own pod_version.
        self.node_version = 0
        self.pod_version = 0
        self._pod_log: list[tuple[int, str]] = []
        self._pod_log_start = 0  # the first pod_version still in the log

    # ---------------------------------------------------------------- reading
    def __len__(self) -> int:
        return self._n

    @property
    def names(self) -> Sequence[str]:
        return self._names

    def row(self, name: str) -> int | None:
        return self._index.get(name)

    def node(self, name: str) -> Object:
        return self._nodes[self._index[name]]

    def node_at(self, row: int) -> Object:
        return self._nodes[row]

    def resource_column(self, resource: str) -> int | None:
        col = self._resource_col.get(resource)
        return col if col is not None and col < self._alloc.shape[1] else None

    def allocatable(self, resource: str) -> IntArray:
        """Allocatable per node (zeros for a resource no node has)."""
        col = self.resource_column(resource)
        return self._alloc[: self._n, col] if col is not None else np.zeros(self._n, np.int64)

    def requested(self, resource: str) -> IntArray:
        """Sum of assigned pods' requests per node; for "pods", the number of pods."""
        col = self.resource_column(resource)
        return self._req[: self._n, col] if col is not None else np.zeros(self._n, np.int64)

    def nonzero_requested(self, resource: str) -> IntArray:
        """cpu or memory requested, counting kube's defaults for pods that request none."""
        return self._nonzero[: self._n, 0 if resource == CPU else 1]

    @property
    def allocatable_matrix(self) -> IntArray:
        return self._alloc[: self._n]

    @property
    def requested_matrix(self) -> IntArray:
        return self._req[: self._n]

    @property
    def nonzero_matrix(self) -> IntArray:
        """[node, (cpu, memory)] requested with kube's defaults for pods that request none."""
        return self._nonzero[: self._n]

    @property
    def unschedulable(self) -> BoolArray:
        return self._unschedulable[: self._n]

    def label_column(self, key: str) -> npt.NDArray[np.int32] | None:
        """Value ids of label `key` per node, -1 where absent; None when no node has the key."""
        col = self._label_cols.get(key)
        return col[: self._n] if col is not None else None

    def label_value_id(self, key: str, value: str) -> int | None:
        ids = self._label_ids.get(key)
        return ids.get(value) if ids is not None else None

    def label_numeric(self, key: str) -> tuple[IntArray, BoolArray]:
        """Label `key` read as a 64-bit integer per node, and where that worked (for Gt/Lt)."""
        col = self.label_column(key)
        if col is None:
            return np.zeros(self._n, np.int64), np.zeros(self._n, np.bool_)
        values = self._label_values[key]
        known = len(values)
        cached = self._numeric_cache.get(key)
        if cached is None or cached[0] != known:
            parsed = [parse_int64(v) for v in values[:known]]
            ints = np.array([p or 0 for p in parsed] + [0], np.int64)
            ok = np.array([p is not None for p in parsed] + [False], np.bool_)
            cached = (known, ints, ok)
            self._numeric_cache[key] = cached
        _, ints, ok = cached
        return ints[col], ok[col]  # col -1 picks the sentinel at the end

    def labels_at(self, row: int) -> dict[str, str]:
        return dict((self._nodes[row].get("metadata") or {}).get("labels") or {})

    @property
    def taint_positions(self) -> npt.NDArray[np.int16]:
        """[node, taint id] -> position of that taint in the node's spec.taints, NO_TAINT if absent."""
        return self._taint_pos[: self._n]

    @property
    def taints(self) -> Sequence[tuple[str, str, str]]:
        """(key, value, effect) for each taint id this snapshot knows."""
        return self.taint_list[: self._taint_pos.shape[1]]

    @property
    def port_counts(self) -> npt.NDArray[np.int32]:
        """[node, port id] -> how many assigned pods use that (ip, protocol, port)."""
        return self._ports[: self._n]

    @property
    def ports(self) -> Sequence[tuple[str, str, int]]:
        return self.port_list[: self._ports.shape[1]]

    @property
    def image_presence(self) -> BoolArray:
        return self._images[: self._n]

    def image_id(self, name: str) -> int | None:
        i = self._image_ids.get(name)
        return i if i is not None and i < self._images.shape[1] else None

    def image_node_counts(self) -> IntArray:
        """How many nodes hold each image (ImageLocality's spread), counted once per node change."""
        if self._image_counts is None:
            self._image_counts = self._images[: self._n].sum(axis=0).astype(np.int64)
        return self._image_counts

    def image_size(self, image_id: int) -> int:
        return int(self._image_size[image_id])

    def pods_on(self, name: str) -> tuple[PodInfo, ...]:
        """The pods assigned (or assumed) on node `name`."""
        row = self._index.get(name)
        return tuple(self._pods[row].values()) if row is not None else ()

    def count_pods(self, predicate: Callable[[PodInfo], bool]) -> IntArray:
        """How many of each node's pods satisfy `predicate` (a Python loop over pods, not nodes'
        arrays: for the few plugins that select pods by labels)."""
        return np.fromiter(
            (sum(1 for p in pods.values() if predicate(p)) for pods in self._pods[: self._n]), np.int64, self._n
        )

    def count_matching(self, selector: LabelSelector, namespace: str) -> IntArray:
        """Per node: its live (not terminating) pods in `namespace` whose labels match `selector`,
        counted over the pod index's columns (a loop over pods only in a few-row subset view)."""
        if self.pod_index is not None:
            return self.pod_index.count_matching(selector, namespace, self._n)
        return self.count_pods(
            lambda p: p.namespace == namespace and not p.terminating and selector.matches(dict(p.labels)))

    def indexed_pods(self) -> PodIndex:
        """The assigned pods as columns (labels, namespace, affinity terms), for plugins that
        select pods with numpy. A subset view has none until asked; then it indexes its few pods."""
        if self.pod_index is None:
            index = PodIndex()
            for row, pods in enumerate(self._pods[: self._n]):
                for p in pods.values():
                    index.add(p, row)
            self.pod_index = index
        return self.pod_index

    def has_pod(self, name: str, pod_key: str) -> bool:
        row = self._index.get(name)
        return row is not None and pod_key in self._pods[row]

    def nodes_changed_since(self, node_version: int, pod_version: int) -> list[str] | None:
        """Nodes whose pods changed after (node_version, pod_version), or None when that cannot be
        told (a node changed since, or the log no longer reaches back that far)."""
        if node_version != self.node_version or pod_version > self.pod_version:
            return None
        if pod_version + 1 < self._pod_log_start:
            return None
        log = self._pod_log
        if pod_version == self.pod_version:
            return []
        if pod_version + 1 == self.pod_version and log and log[-1][0] == self.pod_version:
            return [log[-1][1]]  # one change since: the drain's usual case, each cycle
        i = bisect.bisect_right(log, pod_version, key=lambda e: e[0])
        changed: dict[str, None] = {}
        for version, name in log[i:]:
            if version > self.pod_version:
                break
            changed.setdefault(name)
        return list(changed)

    # ---------------------------------------------------------------- snapshots
    def snapshot(self) -> NodeTable:
        """A frozen view for one scheduling cycle; O(1) now, copies happen on the next write."""
        self.image_node_counts()  # count once here, so every snapshot until the next node change shares it
        snap = NodeTable.__new__(NodeTable)
        snap.__dict__.update(self.__dict__)
        snap.frozen = True
        snap._orphans = {}
        snap._shared = set(_GROUPS)
        snap._numeric_cache = dict(self._numeric_cache)
        snap.pod_index = self.pod_index.share() if self.pod_index is not None else None
        self._shared = set(_GROUPS)
        return snap

    def for_node(
        self, name: str, removed: Iterable[PodInfo] = (), added: Iterable[PodInfo] = ()
    ) -> NodeTable:
        """A private one-row table for node `name` with `removed` pods taken off and `added` put on:
        what preemption asks ("would the pod fit here without these victims?")."""
        row = self._index.get(name)
        if row is None:
            raise KeyError(f"node {name!r} is not in the snapshot")
        view = self._row_view(row)
        for p in removed:
            view.remove_pod(name, p)
        for p in added:
            view.add_pod(name, p)
        return view

    def with_pods(self, placed: Iterable[tuple[str, PodInfo]]) -> NodeTable:
        """A private copy with extra pods placed, e.g. nominated pods that a cycle must respect."""
        placed = list(placed)
        if not placed:
            return self
        # Copy-on-write, as snapshot(): only what the placed pods touch (requests, pods, ports) is
        # copied, not every array (a full copy cost ~2 ms per cycle at 5,000 nodes).
        view = NodeTable.__new__(NodeTable)
        view.__dict__.update(self.__dict__)
        view.frozen = False
        view._shared = set(_GROUPS)
        view._orphans = {}
        view._numeric_cache = dict(self._numeric_cache)
        view.node_version = -1  # a what-if view: never mistaken for the snapshot it came from
        view._pod_log = []
        view._pod_log_start = view.pod_version + 1
        view._port_ids = dict(self._port_ids)  # the port vocabulary grows in place: a private one
        view.port_list = list(self.port_list)
        view.pod_index = self.pod_index.private_copy() if self.pod_index is not None else None
        for node_name, p in placed:
            if node_name in view._index:
                view.add_pod(node_name, p)
        return view

    def _row_view(self, row: int) -> NodeTable:
        """for_node's one-row table, copy-on-write as snapshot(): its arrays are one-row slices of
        this table's (views, no copy), marked shared, so that a pod taken off or put on copies
        that one row first. Preemption's dry run makes one per candidate node; a copy of every
        array by fancy indexing (`_subset`) cost it several times more."""
        shared = {"alloc", "req", "labels", "taints", "ports", "images"}
        # a node's pod dict is replaced on change, never changed in place: the view may share it
        view = self._view_of((row,), slice(row, row + 1), [self._pods[row]], set(shared))
        if not self.frozen:  # this table may still change in place: it must copy first, as after snapshot()
            self._shared |= shared
        return view

    def _subset(self, rows: npt.NDArray[np.intp]) -> NodeTable:
        # indexing with an array of rows already copies (numpy's advanced indexing)
        return self._view_of([int(r) for r in rows], rows, [dict(self._pods[r]) for r in rows], set())

    def _view_of(self, rows: Sequence[int], select: slice | npt.NDArray[np.intp],
                 pods: list[dict[str, PodInfo]], shared: set[str]) -> NodeTable:
        """A what-if table of `rows` (picked from the arrays by `select`: a slice gives views, an
        array of rows copies), never mistaken for the snapshot it came from, with its own
        vocabularies so that it may grow them without touching this table."""
        view = NodeTable.__new__(NodeTable)
        view.__dict__.update(self.__dict__)
        view.frozen = False
        view._n = view._cap = len(rows)
        view._names = [self._names[r] for r in rows]
        view._index = {n: i for i, n in enumerate(view._names)}
        view._nodes = [self._nodes[r] for r in rows]
        view._alloc = self._alloc[select]
        view._unschedulable = self._unschedulable[select]
        view._req = self._req[select]
        view._nonzero = self._nonzero[select]
        view._label_cols = {k: c[select] for k, c in self._label_cols.items()}
        view._taint_pos = self._taint_pos[select]
        view._ports = self._ports[select]
        view._images = self._images[select]
        view._image_counts = None
        view._pods = pods
        view.pod_index = None
        view._orphans = {}
        view._shared = shared
        view._numeric_cache = {}
        view.node_version = -1
        view._pod_log = []
        view._pod_log_start = view.pod_version + 1
        view._port_ids = dict(self._port_ids)
        view.port_list = list(self.port_list)
        return view

    # ---------------------------------------------------------------- writing
    def _writable(self, *groups: str) -> None:
        if self.frozen:
            raise FrozenSnapshotError("a snapshot is read-only; change the NodeTable it came from")
        for g in groups:
            if g in self._shared:
                self._shared.discard(g)
                if g == "alloc":
                    self._alloc = self._alloc.copy()
                    self._unschedulable = self._unschedulable.copy()
                elif g == "req":
                    self._req = self._req.copy()
                    self._nonzero = self._nonzero.copy()
                elif g == "labels":
                    self._label_cols = {k: c.copy() for k, c in self._label_cols.items()}
                elif g == "taints":
                    self._taint_pos = self._taint_pos.copy()
                elif g == "ports":
                    self._ports = self._ports.copy()
                elif g == "images":
                    self._images = self._images.copy()
                    self._image_size = self._image_size.copy()
                    self._image_holders = self._image_holders.copy()
                elif g == "pods":
                    self._pods = list(self._pods)
                elif g == "rows":
                    self._names = list(self._names)
                    self._index = dict(self._index)
                    self._nodes = list(self._nodes)
            if g == "images":
                self._image_counts = None  # about to change: recount when next asked

    def _ensure_capacity(self, rows: int) -> None:
        if rows <= self._cap:
            return
        cap = max(16, self._cap * 2, rows)

        def grow(a: np.ndarray, fill: Any = 0) -> np.ndarray:
            out = np.full((cap, *a.shape[1:]), fill, a.dtype)
            out[: self._n] = a[: self._n]
            return out

        self._alloc = grow(self._alloc)
        self._unschedulable = grow(self._unschedulable, False)
        self._req = grow(self._req)
        self._nonzero = grow(self._nonzero)
        self._label_cols = {k: grow(c, -1) for k, c in self._label_cols.items()}
        self._taint_pos = grow(self._taint_pos, NO_TAINT)
        self._ports = grow(self._ports)
        self._images = grow(self._images, False)
        self._cap = cap
        self._shared -= {"alloc", "req", "labels", "taints", "ports", "images"}

    def _resource_col_for(self, resource: str) -> int:
        col = self._resource_col.get(resource)
        if col is None:
            col = len(self.resource_names)
            self.resource_names = [*self.resource_names, resource]
            self._resource_col = {**self._resource_col, resource: col}
        if col >= self._alloc.shape[1]:
            self._writable("alloc", "req")
            pad = col + 1 - self._alloc.shape[1]
            self._alloc = np.pad(self._alloc, ((0, 0), (0, pad)))
            self._req = np.pad(self._req, ((0, 0), (0, pad)))
        return col

    def _label_col_for(self, key: str) -> npt.NDArray[np.int32]:
        col = self._label_cols.get(key)
        if col is None:
            col = np.full(self._cap, -1, np.int32)
            self._label_cols = {**self._label_cols, key: col}
            self._label_ids.setdefault(key, {})
            self._label_values.setdefault(key, [])
        return col

    def _taint_col_for(self, taint: tuple[str, str, str]) -> int:
        tid = self._taint_ids.get(taint)
        if tid is None:
            tid = len(self.taint_list)
            self.taint_list.append(taint)
            self._taint_ids[taint] = tid
        if tid >= self._taint_pos.shape[1]:
            pad = len(self.taint_list) - self._taint_pos.shape[1]
            self._taint_pos = np.pad(self._taint_pos, ((0, 0), (0, pad)), constant_values=NO_TAINT)
        return tid

    def _port_col_for(self, port: tuple[str, str, int]) -> int:
        pid = self._port_ids.get(port)
        if pid is None:
            pid = len(self.port_list)
            self.port_list.append(port)
            self._port_ids[port] = pid
        if pid >= self._ports.shape[1]:
            self._ports = np.pad(self._ports, ((0, 0), (0, len(self.port_list) - self._ports.shape[1])))
        return pid

    def _image_col_for(self, image: str) -> int:
        iid = self._image_ids.get(image)
        if iid is None:
            iid = len(self.image_list)
            self.image_list.append(image)
            self._image_ids[image] = iid
        if iid >= self._images.shape[1]:
            pad = len(self.image_list) - self._images.shape[1]
            self._images = np.pad(self._images, ((0, 0), (0, pad)))
            self._image_size = np.pad(self._image_size, (0, pad))
            self._image_holders = np.pad(self._image_holders, (0, pad))
        return iid

    def add_node(self, node: Object) -> None:
        """Add a node, or update it if present. Raises ValueError naming a bad allocatable quantity."""
        name = str((node.get("metadata") or {}).get("name") or "")
        if not name:
            raise ValueError("node has no metadata.name")
        if name in self._index:
            self.update_node(node)
            return
        parsed = _parse_node(node)  # before any change, so a bad node leaves the table as it was
        self._writable(*_GROUPS)
        self._ensure_capacity(self._n + 1)
        row = self._n
        self._n += 1
        self._names.append(name)
        self._index[name] = row
        self._nodes.append(node)
        # a reused row may hold a removed node's numbers: clear what _write_node_row does not set
        self._req[row] = 0
        self._nonzero[row] = 0
        self._ports[row] = 0
        self._images[row] = False
        self._pods.append({})
        self._write_node_row(row, parsed)
        for p in self._orphans.pop(name, {}).values():
            self.add_pod(name, p)

    def update_node(self, node: Object) -> None:
        name = str((node.get("metadata") or {}).get("name") or "")
        row = self._index.get(name)
        if row is None:
            self.add_node(node)
            return
        parsed = _parse_node(node)
        self._writable("rows")
        previous, self._nodes[row] = self._nodes[row], node
        # status heartbeats and annotations change nothing the scheduler reads: keep the arrays
        # (and the node_version, so cycles can go on reusing earlier verdicts)
        if parsed != _parse_node(previous):
            self._write_node_row(row, parsed)

    def _write_node_row(self, row: int, parsed: _ParsedNode) -> None:
        self._writable("alloc", "labels", "taints", "images")
        self.node_version += 1
        for resource in parsed.allocatable:
            self._resource_col_for(resource)
        self._alloc[row] = 0
        for resource, amount in parsed.allocatable.items():
            self._alloc[row, self._resource_col[resource]] = amount
        self._unschedulable[row] = parsed.unschedulable
        for col in self._label_cols.values():
            col[row] = -1
        for key, value in parsed.labels.items():
            col = self._label_col_for(key)
            ids = self._label_ids[key]
            vid = ids.get(value)
            if vid is None:
                vid = len(self._label_values[key])
                self._label_values[key].append(value)
                ids[value] = vid
            col[row] = vid
        self._taint_pos[row] = NO_TAINT
        for pos, t in enumerate(parsed.taints):
            tid = self._taint_col_for(t)
            if self._taint_pos[row, tid] == NO_TAINT:  # a duplicate keeps its first position
                self._taint_pos[row, tid] = pos
        # kube's cache on a node update: its images are removed (an image no node holds is
        # forgotten), then added, the first entry of a name counting
        self._image_holders[self._images[row]] -= 1
        self._images[row] = False
        size_of: dict[int, int] = {}  # image column -> size (a name listed twice: its first entry)
        for image, size in parsed.images:
            size_of.setdefault(self._image_col_for(image), size)
        if size_of:
            cols = np.fromiter(size_of, np.intp, len(size_of))
            self._images[row, cols] = True
            self._image_holders[cols] += 1
            first = self._image_holders[cols] == 1  # the first holder's size stands for every node
            self._image_size[cols[first]] = np.fromiter(size_of.values(), np.int64, len(size_of))[first]

    def remove_node(self, name: str) -> None:
        """Remove a node's row. Its pods wait as orphans in case the node comes back (kube's cache
        keeps a node's pods until they are deleted too)."""
        row = self._index.get(name)
        if row is None:
            return
        self._writable(*_GROUPS)
        self._image_holders[self._images[row]] -= 1
        if self._pods[row]:
            self._orphans[name] = dict(self._pods[row])  # a copy: snapshots still hold the original
            if self.pod_index is not None:
                for key, info in self._pods[row].items():
                    self.pod_index.remove(key, info)
        last = self._n - 1
        if row != last:  # move the last row into the hole, so rows stay dense
            for a in (self._alloc, self._unschedulable, self._req, self._nonzero, self._taint_pos,
                      self._ports, self._images, *self._label_cols.values()):
                a[row] = a[last]
            self._pods[row] = self._pods[last]
            if self.pod_index is not None and self._pods[row]:
                self.pod_index.move_node(list(self._pods[row]), row)
            self._names[row], self._nodes[row] = self._names[last], self._nodes[last]
            self._index[self._names[row]] = row
        self._pods.pop()
        self._names.pop()
        self._nodes.pop()
        del self._index[name]
        self._n -= 1
        self.node_version += 1

    def add_pod(self, node_name: str, pod: PodInfo) -> None:
        """Count `pod` on node `node_name` (assigned or assumed). Adding a pod twice is a no-op."""
        row = self._index.get(node_name)
        if row is None:
            if self.frozen:
                raise FrozenSnapshotError("a snapshot is read-only; change the NodeTable it came from")
            self._orphans.setdefault(node_name, {})[pod.key] = pod
            return
        if pod.key in self._pods[row]:
            return
        self._writable("req", "pods", *(("ports",) if pod.host_ports else ()))
        self._apply_pod(row, pod, +1)
        self._log_pod_change(node_name)
        self._pods[row] = {**self._pods[row], pod.key: pod}
        if self.pod_index is not None:
            self.pod_index.add(pod, row)

    def remove_pod(self, node_name: str, pod: PodInfo | str) -> PodInfo | None:
        """Stop counting a pod (by PodInfo or key); returns the PodInfo that was counted, if any."""
        key = pod if isinstance(pod, str) else pod.key
        row = self._index.get(node_name)
        if row is None:
            orphans = self._orphans.get(node_name)
            return orphans.pop(key, None) if orphans and not self.frozen else None
        counted = self._pods[row].get(key)
        if counted is None:
            return None
        self._writable("req", "pods", *(("ports",) if counted.host_ports else ()))
        self._apply_pod(row, counted, -1)
        self._log_pod_change(node_name)
        if self.pod_index is not None:
            self.pod_index.remove(key, counted)
        remaining = dict(self._pods[row])
        del remaining[key]
        self._pods[row] = remaining
        return counted

    def _log_pod_change(self, node_name: str) -> None:
        self.pod_version += 1
        if len(self._pod_log) >= self.pod_log_limit:  # keep the newest half; a new list, as snapshots share it
            self._pod_log = self._pod_log[self.pod_log_limit // 2:]
            self._pod_log_start = self._pod_log[0][0]
        elif not self._pod_log:
            self._pod_log_start = self.pod_version
        self._pod_log.append((self.pod_version, node_name))

    def _apply_pod(self, row: int, pod: PodInfo, sign: int) -> None:
        for resource, amount in pod.requests.items():
            if amount:
                col = self._resource_col_for(resource)  # may widen self._req: look it up after
                self._req[row, col] += sign * amount
        self._req[row, self._resource_col[PODS]] += sign
        self._nonzero[row, 0] += sign * pod.nonzero_cpu
        self._nonzero[row, 1] += sign * pod.nonzero_memory
        for hp in pod.host_ports:
            col = self._port_col_for((hp.ip, hp.protocol, hp.port))  # may widen self._ports
            self._ports[row, col] += sign


@dataclass(frozen=True, slots=True)
class _ParsedNode:
    """What the table keeps of a node; equal for two node objects that schedule alike."""

    allocatable: dict[str, int]
    unschedulable: bool
    labels: dict[str, str]
    taints: list[tuple[str, str, str]]
    images: list[tuple[str, int]]


def _parse_node(node: Object) -> _ParsedNode:
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    name = meta.get("name")
    raw = status.get("allocatable") or status.get("capacity") or {}
    allocatable: dict[str, int] = {}
    for resource, text in raw.items():
        if resource in BASE_RESOURCES or is_scalar_resource(resource):
            try:
                allocatable[resource] = resource_amount(resource, text)
            except ValueError as e:
                raise ValueError(f"node {name}: status.allocatable[{resource}]: {e}") from None
    taints = [
        (str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in spec.get("taints") or []
    ]
    images = []
    for img in status.get("images") or []:
        size = int(img.get("sizeBytes") or 0)
        for image_name in img.get("names") or []:
            images.append((str(image_name), size))
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    return _ParsedNode(allocatable, bool(spec.get("unschedulable")), labels, taints, images)
