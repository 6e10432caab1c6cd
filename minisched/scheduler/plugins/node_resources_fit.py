"""NodeResourcesFit (Filter, Score): a pod fits where every resource it requests is still free, and
one pod slot is left; the score strategy (LeastAllocated by default, MostAllocated or
RequestedToCapacityRatio) ranks the nodes that fit.

Filter uses the pod's real requests; scoring uses the "non-zero" ones (a container without a cpu or
memory request counts as 100m / 200Mi), as kube-scheduler does. All integer arithmetic follows
kube's (noderesources/least_allocated.go, most_allocated.go, requested_to_capacity_ratio.go).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework import cluster_event as ce
from minisched.scheduler.framework import signature
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import MAX_NODE_SCORE, FilterResult, Handle
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    PodInfo,
    is_scalar_resource,
)
from minisched.scheduler.plugins.helpers import (
    assigned_node,
    node_allocatable,
    parsed_pod,
    summed_nonzero,
    summed_requests,
    take,
)
from minisched.scheduler.snapshot import NodeTable

NAME = "NodeResourcesFit"
TOO_MANY_PODS = "Too many pods"

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10  # shape scores are 0..10, scaled to 0..100

Object = dict[str, Any]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ResourceSpec:
    name: str
    weight: int = 1


DEFAULT_RESOURCES = (ResourceSpec(CPU, 1), ResourceSpec(MEMORY, 1))
# Up to this many rows a score is computed node by node with the pure rule in Python integers:
# a cycle that reuses the last verdicts for a pod shape re-scores only the node or two that got a
# pod since, and there numpy's ~20 calls per score (a few us each) cost ~5x the arithmetic.
# Both ways give the same integers (tests/scheduler/plugins/test_few_rows_scores.py).
FEW_ROWS = 8


@dataclass(frozen=True)
class FitArgs:
    """NodeResourcesFitArgs (kubescheduler.config.k8s.io/v1)."""

    strategy: str = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    shape: tuple[tuple[int, int], ...] = ((0, 0), (100, 10))  # (utilization, score 0..10)
    ignored_resources: frozenset[str] = frozenset()
    ignored_resource_groups: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, args: Mapping[str, Any] | None) -> FitArgs:
        args = dict(args or {})
        unknown = set(args) - {"scoringStrategy", "ignoredResources", "ignoredResourceGroups"}
        if unknown:
            raise ValueError(f"NodeResourcesFitArgs: unknown field(s) {sorted(unknown)}")
        strategy = args.get("scoringStrategy") or {}
        kind = strategy.get("type", LEAST_ALLOCATED)
        if kind not in STRATEGIES:
            raise ValueError(f"NodeResourcesFitArgs.scoringStrategy.type {kind!r} is not one of {', '.join(STRATEGIES)}")
        resources = parse_resources(strategy.get("resources"), "NodeResourcesFitArgs.scoringStrategy.resources")
        shape: tuple[tuple[int, int], ...] = cls.shape
        if kind == REQUESTED_TO_CAPACITY_RATIO:
            raw = (strategy.get("requestedToCapacityRatio") or {}).get("shape")
            if not raw:
                raise ValueError("NodeResourcesFitArgs: RequestedToCapacityRatio needs requestedToCapacityRatio.shape")
            shape = tuple((int(p.get("utilization", 0)), int(p.get("score", 0))) for p in raw)
            for i, (u, s) in enumerate(shape):
                if not 0 <= u <= MAX_UTILIZATION or not 0 <= s <= MAX_CUSTOM_PRIORITY_SCORE:
                    raise ValueError(f"requestedToCapacityRatio.shape[{i}]: utilization must be 0..100 and score 0..10")
                if i and u <= shape[i - 1][0]:
                    raise ValueError(f"requestedToCapacityRatio.shape[{i}]: utilization values must be increasing")
        return cls(
            kind, resources, shape,
            frozenset(args.get("ignoredResources") or ()), frozenset(args.get("ignoredResourceGroups") or ()),
        )


def parse_resources(raw: Any, where: str) -> tuple[ResourceSpec, ...]:
    if raw is None:
        return DEFAULT_RESOURCES
    out = []
    for i, r in enumerate(raw):
        weight = r.get("weight", 1)
        if not r.get("name") or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise ValueError(f"{where}[{i}]: needs a name and a weight in 1..100, got {r!r}")
        out.append(ResourceSpec(str(r["name"]), weight))
    return tuple(out)


def _ignored(args: FitArgs, resource: str) -> bool:
    if not is_scalar_resource(resource):
        return False
    return resource in args.ignored_resources or resource.split("/", 1)[0] in args.ignored_resource_groups


def _checked_resources(pod: PodInfo, args: FitArgs) -> list[tuple[str, int]]:
    """(resource, request) the filter checks, in kube's order: cpu, memory, ephemeral-storage, then
    extended resources."""
    order = {CPU: 0, MEMORY: 1, EPHEMERAL_STORAGE: 2}
    items = [(r, v) for r, v in pod.requests.items() if v > 0 and not _ignored(args, r)]
    return sorted(items, key=lambda rv: (order.get(rv[0], 3), rv[0]))


def insufficient_resources(
    pod: PodInfo, node: Object, node_pods: Sequence[PodInfo], args: FitArgs = FitArgs()
) -> list[str]:
    """The pure filter rule for one node: the reasons it cannot take the pod (empty: it fits)."""
    allocatable, requested = node_allocatable(node), summed_requests(node_pods)
    reasons = []
    if requested[PODS] + 1 > allocatable.get(PODS, 0):
        reasons.append(TOO_MANY_PODS)
    for resource, amount in _checked_resources(pod, args):
        if amount > allocatable.get(resource, 0) - requested.get(resource, 0):
            reasons.append(f"Insufficient {resource}")
    return reasons


def _fits_empty(pod: PodInfo, allocatable: Mapping[str, int], args: FitArgs) -> bool:
    """kube's isFit: would the pod fit a node of this allocatable with nothing else on it?"""
    if allocatable.get(PODS, 0) < 1:
        return False
    return all(amount <= allocatable.get(resource, 0) for resource, amount in _checked_resources(pod, args))


def beyond_allocatable(pod: PodInfo, node: Object, args: FitArgs = FitArgs()) -> bool:
    """The pure rule for the status code: does the pod ask more of some resource than the node has
    at all? Then no eviction can help (kube 1.35's UnschedulableAndUnresolvable)."""
    allocatable = node_allocatable(node)
    return any(amount > allocatable.get(resource, 0) for resource, amount in _checked_resources(pod, args))


# ---- scoring, one node at a time (kube's scorer functions, verbatim in Python) ----
def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def broken_linear(shape: Sequence[tuple[int, int]], p: int) -> int:
    """kube's helper.BuildBrokenLinearFunction over (utilization, score 0..100) points."""
    for i, (u, s) in enumerate(shape):
        if p <= u:
            if i == 0:
                return s
            u0, s0 = shape[i - 1]
            return s0 + _go_div((s - s0) * (p - u0), u - u0)
    return shape[-1][1]


def _go_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


def allocation_score(strategy: str, requested: Sequence[int], allocatable: Sequence[int],
                     weights: Sequence[int], shape: Sequence[tuple[int, int]] = ()) -> int:
    """Combine per-resource scores as kube's resourceAllocationScorer does (resources with zero
    allocatable are left out)."""
    node_score = weight_sum = 0
    scaled = ([(u, s * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in shape]
              if strategy == REQUESTED_TO_CAPACITY_RATIO else [])
    for req, alloc, w in zip(requested, allocatable, weights, strict=True):
        if alloc == 0:
            continue
        if strategy == LEAST_ALLOCATED:
            s = least_requested_score(req, alloc)
        elif strategy == MOST_ALLOCATED:
            s = most_requested_score(req, alloc)
        else:
            s = broken_linear(scaled, MAX_UTILIZATION if req > alloc else req * MAX_UTILIZATION // alloc)
            if s <= 0:  # RequestedToCapacityRatio leaves zero scores out of the average
                continue
        node_score += s * w
        weight_sum += w
    if weight_sum == 0:
        return 0
    if strategy == REQUESTED_TO_CAPACITY_RATIO:
        return (2 * node_score + weight_sum) // (2 * weight_sum)  # math.Round of a non-negative ratio
    return node_score // weight_sum


def pod_score_requests(pod: PodInfo, resources: Sequence[ResourceSpec], *, use_requested: bool) -> list[int]:
    """The pod's request per scored resource (kube's calculatePodResourceRequestList); cpu/memory
    "non-zero" as the incoming pod's unless `use_requested`."""
    out = []
    for r in resources:
        if not use_requested and r.name == CPU:
            out.append(pod.incoming_nonzero_cpu)
        elif not use_requested and r.name == MEMORY:
            out.append(pod.incoming_nonzero_memory)
        else:
            out.append(pod.request(r.name))
    return out


def node_score_inputs(pod: PodInfo, node: Object, node_pods: Sequence[PodInfo],
                      resources: Sequence[ResourceSpec], *, use_requested: bool) -> tuple[list[int], list[int]]:
    """(requested incl. the pod, allocatable) per scored resource for one node, as kube's
    calculateResourceAllocatableRequest: a scalar resource the pod does not ask for is left out."""
    allocatable = node_allocatable(node)
    summed = summed_requests(node_pods)
    nz_cpu, nz_mem = summed_nonzero(node_pods)
    pod_reqs = pod_score_requests(pod, resources, use_requested=use_requested)
    reqs, allocs = [], []
    for r, pod_req in zip(resources, pod_reqs, strict=True):
        if pod_req == 0 and is_scalar_resource(r.name):
            reqs.append(0)
            allocs.append(0)
            continue
        if r.name in (CPU, MEMORY) and not use_requested:
            base = nz_cpu if r.name == CPU else nz_mem
        else:
            base = summed.get(r.name, 0)
        if r.name not in (CPU, MEMORY, EPHEMERAL_STORAGE) and r.name not in allocatable:
            reqs.append(0)
            allocs.append(0)
            continue
        allocs.append(allocatable.get(r.name, 0))
        reqs.append(base + pod_req)
    return reqs, allocs


def node_score(pod: PodInfo, node: Object, node_pods: Sequence[PodInfo], args: FitArgs = FitArgs()) -> int:
    """The pure score for one node."""
    reqs, allocs = node_score_inputs(pod, node, node_pods, args.resources, use_requested=False)
    return allocation_score(args.strategy, reqs, allocs, [r.weight for r in args.resources], args.shape)


# ---- vectorised ----
def score_inputs(pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp], resources: Sequence[ResourceSpec],
                 *, use_requested: bool) -> tuple[IntArray, IntArray]:
    """[rows, resources] matrices of requested (with the pod) and allocatable; zero allocatable
    for resources left out of scoring (a scalar resource the pod does not ask for, or no node has)."""
    pod_reqs = pod_score_requests(pod, resources, use_requested=use_requested)
    n, k = len(nodes), len(resources)
    cols: list[int] = []
    left_out: list[int] = []
    for j, (r, pod_req) in enumerate(zip(resources, pod_reqs, strict=True)):
        col = nodes.resource_column(r.name)
        if col is None or (pod_req == 0 and is_scalar_resource(r.name)):
            left_out.append(j)
            col = 0
        cols.append(col)
    # the rows first, then the k columns: a cycle that reuses the last verdicts scores only the few
    # rows that changed, and gathering the columns of every node first copied the whole matrix
    alloc = _gather(nodes.allocatable_matrix, rows, n, cols)
    if left_out:
        alloc[:, left_out] = 0
    names = tuple(r.name for r in resources)
    if use_requested:
        base = _gather(nodes.requested_matrix, rows, n, cols)
    elif names == (CPU, MEMORY):  # the default: both from the non-zero matrix, no per-column work
        base = take(nodes.nonzero_matrix, rows, n)
    else:
        base = np.empty((len(rows), k), np.int64)
        for j, (name, col) in enumerate(zip(names, cols, strict=True)):
            source = nodes.nonzero_requested(name) if name in (CPU, MEMORY) else nodes.requested_matrix[:, col]
            base[:, j] = take(source, rows, n)
    return base + np.asarray(pod_reqs, np.int64), alloc


def few_rows_score_inputs(pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp],
                           resources: Sequence[ResourceSpec], *, use_requested: bool) -> list[tuple[list[int], list[int]]]:
    """`score_inputs` for a handful of rows (see FEW_ROWS), in Python integers: (requested with the
    pod, allocatable) per row, a resource left out of scoring with allocatable 0 as there."""
    pod_reqs = pod_score_requests(pod, resources, use_requested=use_requested)
    alloc, req, nonzero = nodes.allocatable_matrix, nodes.requested_matrix, nodes.nonzero_matrix
    out = []
    for row in rows.tolist():
        reqs, allocs = [], []
        for r, pod_req in zip(resources, pod_reqs, strict=True):
            col = nodes.resource_column(r.name)
            if col is None or (pod_req == 0 and is_scalar_resource(r.name)):
                reqs.append(pod_req)
                allocs.append(0)
                continue
            if not use_requested and r.name in (CPU, MEMORY):
                base = int(nonzero[row, 0 if r.name == CPU else 1])
            else:
                base = int(req[row, col])
            reqs.append(base + pod_req)
            allocs.append(int(alloc[row, col]))
        out.append((reqs, allocs))
    return out


def _gather(matrix: IntArray, rows: npt.NDArray[np.intp], n: int, cols: list[int]) -> IntArray:
    """`matrix[rows][:, cols]`, a new array (the caller writes to it)."""
    return matrix[:, cols] if len(rows) == n else matrix[rows][:, cols]


def allocation_scores(strategy: str, req: IntArray, alloc: IntArray, weights: Sequence[int],
                      shape: Sequence[tuple[int, int]] = ()) -> IntArray:
    """`allocation_score` for every row at once: a short loop over resources (columns), with the
    masks skipped when every node has the resource (the usual case)."""
    m, k = req.shape
    node_score = np.zeros(m, np.int64)
    weight_sum: IntArray | int = 0
    scaled = [(u, sc * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for u, sc in shape]
    for j in range(k):
        a, r, w = alloc[:, j], req[:, j], weights[j]
        valid = a != 0
        everywhere = bool(valid.all())
        safe = a if everywhere else np.where(valid, a, 1)
        if strategy == LEAST_ALLOCATED:
            s = (a - r) * MAX_NODE_SCORE // safe
            s[r > a] = 0
        elif strategy == MOST_ALLOCATED:
            s = np.minimum(r, a) * MAX_NODE_SCORE // safe
        else:
            p = r * MAX_UTILIZATION // safe
            p[r > a] = MAX_UTILIZATION
            s = _broken_linear_vec(scaled, p)
            valid = valid & (s > 0)  # RequestedToCapacityRatio leaves zero scores out of the average
            everywhere = False
        if everywhere:
            node_score += s * w
            weight_sum = weight_sum + w
        else:
            counted = valid * w
            node_score += s * counted
            weight_sum = weight_sum + counted
    if isinstance(weight_sum, int):
        if weight_sum == 0:
            return np.zeros(m, np.int64)
        return node_score // weight_sum
    safe_sum = np.maximum(weight_sum, 1)
    if strategy == REQUESTED_TO_CAPACITY_RATIO:
        out = (2 * node_score + weight_sum) // (2 * safe_sum)  # math.Round of a non-negative ratio
    else:
        out = node_score // safe_sum
    return np.where(weight_sum == 0, 0, out).astype(np.int64)


def _broken_linear_vec(shape: Sequence[tuple[int, int]], p: IntArray) -> IntArray:
    out = np.full(p.shape, shape[-1][1], np.int64)
    done = np.zeros(p.shape, np.bool_)
    for i, (u, s) in enumerate(shape):
        m = ~done & (p <= u)
        if i == 0:
            out[m] = s
        else:
            u0, s0 = shape[i - 1]
            num = (s - s0) * (p[m] - u0)
            q = np.abs(num) // (u - u0)
            out[m] = s0 + np.where(num < 0, -q, q)
        done |= m
    return out


class NodeResourcesFit:
    name = NAME
    reads_pods = True  # results change with the pods on a node

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[signature.Fragment], Status]:
        """kube's Fit.SignPod: the pod's requests (with the non-zero defaults scoring uses)."""
        return [(signature.RESOURCES, signature.resources_signer(pod))], Status.success()

    def __init__(self, args: FitArgs = FitArgs()) -> None:
        self.args = args
        self._last_node: tuple[Object, dict[str, int]] | None = None  # (node object, its allocatable)

    def events_to_register(self) -> list[ce.ClusterEventWithHint]:
        """kube 1.35 (with queueing hints): an assigned pod deleted, a node added or its allocatable
        changed, each with a hint. (kube also registers a pod's scale-down, for in-place resize,
        which minisched does not model.)"""
        return [*ce.events(self.is_schedulable_after_pod_delete, ce.ASSIGNED_POD_DELETE),
                *ce.events(self.is_schedulable_after_node_change, ce.NODE_ADD, ce.NODE_ALLOCATABLE_CHANGE)]

    def _allocatable(self, node: Object) -> dict[str, int]:
        """The node's allocatable, parsed once per event: the queue asks the hint for every parked
        pod with the same node object (5,000 parses of one node cost ~0.15 s per event)."""
        last = self._last_node
        if last is not None and last[0] is node:
            return last[1]
        allocatable = node_allocatable(node)
        self._last_node = (node, allocatable)
        return allocatable

    def is_schedulable_after_pod_delete(self, pod: Object, old: Object | None, new: Object | None) -> ce.QueueingHint:
        """kube's isSchedulableAfterPodEvent for a delete: only a pod that held room (bound, or
        nominated somewhere) frees any."""
        if old is None:
            return ce.QUEUE
        nominated = str((old.get("status") or {}).get("nominatedNodeName") or "")
        return ce.QUEUE if assigned_node(old) or nominated else ce.QUEUE_SKIP

    def is_schedulable_after_node_change(self, pod: Object, old: Object | None, new: Object | None) -> ce.QueueingHint:
        """kube's isSchedulableAfterNodeChange: skip a node too small for the pod even empty, and an
        update that grew nothing the pod asks for."""
        info = parsed_pod(pod)
        if info is None or new is None:
            return ce.QUEUE
        after = self._allocatable(new)
        if not _fits_empty(info, after, self.args):
            return ce.QUEUE_SKIP
        if old is None:
            return ce.QUEUE
        before = node_allocatable(old)
        asked = [PODS, *(r for r, _ in _checked_resources(info, self.args))]
        grew = any(after.get(r, 0) > before.get(r, 0) for r in asked)
        return ce.QUEUE if grew else ce.QUEUE_SKIP

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        alloc, req = nodes.allocatable_matrix, nodes.requested_matrix
        pods_col = nodes.resource_column(PODS)
        assert pods_col is not None
        if len(nodes) == 1:  # preemption's what-if node, asked hundreds of times per preemption
            return self._filter_one(pod, nodes, alloc[0].tolist(), req[0].tolist(), pods_col)
        reasons = (req[:, pods_col] + 1 > alloc[:, pods_col]).astype(np.int64)
        messages = [TOO_MANY_PODS]
        # kube 1.35: a request beyond the node's whole allocatable cannot be helped by preemption
        # (InsufficientResource.Unresolvable), so the node fails UnschedulableAndUnresolvable
        never = np.zeros(len(nodes), np.bool_)
        for bit, (resource, amount) in enumerate(_checked_resources(pod, self.args), start=1):
            col = nodes.resource_column(resource)  # None: no node offers it at all
            if col is None:
                short = np.ones(len(nodes), np.bool_)
                never[:] = True
            else:
                short = amount > alloc[:, col] - req[:, col]
                never |= amount > alloc[:, col]
            reasons |= short.astype(np.int64) << bit
            messages.append(f"Insufficient {resource}")
        return FilterResult(reasons == 0, reasons, tuple(messages), Code.UNSCHEDULABLE,
                            unresolvable=never if never.any() else None)

    def filter_row(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> FilterResult:
        """`filter` on row `row` alone (interface.RowFilter): the reuse cache's question about the
        node that got or lost a pod, without a one-row table."""
        pods_col = nodes.resource_column(PODS)
        assert pods_col is not None
        return self._filter_one(pod, nodes, nodes.allocatable_matrix[row].tolist(),
                                nodes.requested_matrix[row].tolist(), pods_col)

    def _filter_one(self, pod: PodInfo, nodes: NodeTable, alloc: list[int], req: list[int],
                    pods_col: int) -> FilterResult:
        """`filter` on a one-row table in Python integers (numpy's per-call cost dominates there)."""
        checks, used = _one_row_checks(_checked_resources(pod, self.args), nodes, alloc, req)
        bits, never = _one_row_verdict(checks, alloc[pods_col], req[pods_col], used)
        if not bits:
            return FilterResult.all_pass(1)
        return FilterResult(np.zeros(1, np.bool_), np.array([bits], np.int64), _one_row_messages(checks),
                            Code.UNSCHEDULABLE, unresolvable=np.ones(1, np.bool_) if never else None)

    def one_node_what_if(self, state: CycleState, pod: PodInfo, nodes: NodeTable, row: int) -> FitWhatIf:
        """`filter` on row `row` of `nodes` kept in Python integers while pods come and go there
        (preemption's dry run): no one-row table, no FilterResult per question."""
        return FitWhatIf(pod, nodes, row, self.args)

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]) -> IntArray:
        weights = [r.weight for r in self.args.resources]
        if len(rows) <= FEW_ROWS:  # the per-node rule: the same integers, without numpy's per-call cost
            inputs = few_rows_score_inputs(pod, nodes, rows, self.args.resources, use_requested=False)
            return np.array([allocation_score(self.args.strategy, r, a, weights, self.args.shape)
                             for r, a in inputs], np.int64)
        req, alloc = score_inputs(pod, nodes, rows, self.args.resources, use_requested=False)
        return allocation_scores(self.args.strategy, req, alloc, weights, self.args.shape)


Check = tuple[str, int, int | None]  # (resource, request, the node's allocatable; None: no node has it)


def _one_row_checks(checked: Sequence[tuple[str, int]], nodes: NodeTable, alloc: Sequence[int],
                    req: Sequence[int]) -> tuple[list[Check], list[int]]:
    """For a one-row table: each checked resource with the node's allocatable, and what its pods
    request of it (0 where no node has the resource)."""
    checks: list[Check] = []
    used: list[int] = []
    for resource, amount in checked:
        col = nodes.resource_column(resource)
        checks.append((resource, amount, None if col is None else alloc[col]))
        used.append(0 if col is None else req[col])
    return checks, used


def _one_row_verdict(checks: Sequence[Check], pods_alloc: int, pods_used: int, used: Sequence[int]) -> tuple[int, bool]:
    """(reason bits over _one_row_messages, unresolvable) for one node; bits 0: the pod fits."""
    bits = int(pods_used + 1 > pods_alloc)
    never = False
    for bit, ((_, amount, allocatable), in_use) in enumerate(zip(checks, used, strict=True), start=1):
        if allocatable is None:
            bits |= 1 << bit
            never = True
        else:
            if amount > allocatable - in_use:
                bits |= 1 << bit
            if amount > allocatable:
                never = True
    return bits, never


def _one_row_messages(checks: Sequence[Check]) -> tuple[str, ...]:
    return (TOO_MANY_PODS, *(f"Insufficient {resource}" for resource, _, _ in checks))


class FitWhatIf:
    """NodeResourcesFit on one row while pods come off and go back (OneNodeWhatIf): the node's
    pod count and what its pods request of each resource the pod asks for, moved by each pod
    added or removed as NodeTable.add_pod / remove_pod move the table's row; `status()` is the
    verdict `filter` gives on that row (the same _one_row_verdict)."""

    __slots__ = ("_checks", "_index", "_used", "_pods_alloc", "_pods_used", "_statuses")

    def __init__(self, pod: PodInfo, nodes: NodeTable, row: int, args: FitArgs) -> None:
        alloc, req = nodes.allocatable_matrix[row].tolist(), nodes.requested_matrix[row].tolist()
        pods_col = nodes.resource_column(PODS)
        assert pods_col is not None
        self._checks, self._used = _one_row_checks(_checked_resources(pod, args), nodes, alloc, req)
        self._index = {r: i for i, (r, _, allocatable) in enumerate(self._checks) if allocatable is not None}
        self._pods_alloc, self._pods_used = alloc[pods_col], req[pods_col]
        self._statuses: dict[tuple[int, bool], Status] = {}

    def add(self, pod: PodInfo) -> None:
        self._move(pod, 1)

    def remove(self, pod: PodInfo) -> None:
        self._move(pod, -1)

    def _move(self, pod: PodInfo, sign: int) -> None:
        self._pods_used += sign
        index, used = self._index, self._used
        for resource, amount in pod.requests.items():
            i = index.get(resource)
            if i is not None:
                used[i] += sign * amount

    def status(self) -> Status:
        bits, never = _one_row_verdict(self._checks, self._pods_alloc, self._pods_used, self._used)
        if not bits:
            return Status.success()
        status = self._statuses.get((bits, never))
        if status is None:
            reasons = tuple(m for i, m in enumerate(_one_row_messages(self._checks)) if bits >> i & 1)
            code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if never else Code.UNSCHEDULABLE
            status = self._statuses[(bits, never)] = Status(code, reasons, NAME)
        return status


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> NodeResourcesFit:
    return NodeResourcesFit(FitArgs.parse(args))
