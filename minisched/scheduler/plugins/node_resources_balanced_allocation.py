"""NodeResourcesBalancedAllocation (Score): prefer nodes whose resources would be used evenly.

score = (1 - std) * 100, std being the standard deviation of requested/allocatable over the scored
resources (cpu and memory by default; for two resources std = |f1 - f2| / 2). Uses the real requests
(no non-zero defaults) and skips best-effort pods, as kube-scheduler does since 1.32.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework import signature
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import MAX_NODE_SCORE, Handle
from minisched.scheduler.framework.status import Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.node_resources_fit import (
    DEFAULT_RESOURCES,
    FEW_ROWS,
    ResourceSpec,
    few_rows_score_inputs,
    node_score_inputs,
    parse_resources,
    pod_score_requests,
    score_inputs,
)
from minisched.scheduler.snapshot import NodeTable

NAME = "NodeResourcesBalancedAllocation"

Object = dict[str, Any]
IntArray = npt.NDArray[np.int64]


def balanced_score(requested: Sequence[float], allocatable: Sequence[float]) -> int:
    """kube's balancedResourceScorer for one node."""
    fractions = []
    for req, alloc in zip(requested, allocatable, strict=True):
        if alloc == 0:
            continue
        fractions.append(min(req / alloc, 1.0))
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


def node_score(pod: PodInfo, node: Object, node_pods: Sequence[PodInfo],
               resources: Sequence[ResourceSpec] = DEFAULT_RESOURCES) -> int:
    """The pure score for one node (0 for a best-effort pod, which the plugin skips)."""
    if not any(pod_score_requests(pod, resources, use_requested=True)):
        return 0
    reqs, allocs = node_score_inputs(pod, node, node_pods, resources, use_requested=True)
    return balanced_score(reqs, allocs)


def balanced_scores(req: IntArray, alloc: IntArray) -> IntArray:
    """balanced_score for every row; the same float operations in the same order as kube's Go."""
    n, k = req.shape
    valid = alloc != 0
    if k == 2 and valid.all():  # the usual case (cpu and memory on every node): kube's shortcut formula
        frac = np.minimum(req / alloc, 1.0)
        return ((1 - np.abs((frac[:, 0] - frac[:, 1]) / 2)) * MAX_NODE_SCORE).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(valid, np.minimum(req / np.where(valid, alloc, 1), 1.0), 0.0)
    count = valid.sum(axis=1)
    std = np.zeros(n)
    if k >= 2:
        # exactly two valid: |f_first - f_second| / 2 with the first two valid columns, in order
        first = valid.argmax(axis=1)
        rest = valid.copy()
        rest[np.arange(n), first] = False
        second = rest.argmax(axis=1)
        two = np.abs((frac[np.arange(n), first] - frac[np.arange(n), second]) / 2)
        std = np.where(count == 2, two, std)
    if k > 2:
        total = np.zeros(n)
        for j in range(k):
            total = total + frac[:, j]
        mean = total / np.maximum(count, 1)
        sq = np.zeros(n)
        for j in range(k):
            d = np.where(valid[:, j], frac[:, j] - mean, 0.0)
            sq = sq + d * d
        std = np.where(count > 2, np.sqrt(sq / np.maximum(count, 1)), std)
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)


class NodeResourcesBalancedAllocation:
    name = NAME
    reads_pods = True  # results change with the pods on a node

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[signature.Fragment], Status]:
        """kube's BalancedAllocation.SignPod: the pod's requests."""
        return [(signature.RESOURCES, signature.resources_signer(pod))], Status.success()

    def __init__(self, resources: Sequence[ResourceSpec] = DEFAULT_RESOURCES) -> None:
        self.resources = tuple(resources)

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]) -> Status:
        if not any(pod_score_requests(pod, self.resources, use_requested=True)):
            return Status.skip(NAME)  # best-effort pods would all pile onto one node otherwise
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, rows: npt.NDArray[np.intp]) -> IntArray:
        if len(rows) <= FEW_ROWS:  # node by node (see FEW_ROWS), in floats converted as numpy does
            inputs = few_rows_score_inputs(pod, nodes, rows, self.resources, use_requested=True)
            return np.array([balanced_score([float(x) for x in r], [float(x) for x in a]) for r, a in inputs], np.int64)
        req, alloc = score_inputs(pod, nodes, rows, self.resources, use_requested=True)
        return balanced_scores(req, alloc)


def new(args: Mapping[str, Any] | None, handle: Handle | None) -> NodeResourcesBalancedAllocation:
    args = dict(args or {})
    unknown = set(args) - {"resources"}
    if unknown:
        raise ValueError(f"NodeResourcesBalancedAllocationArgs: unknown field(s) {sorted(unknown)}")
    return NodeResourcesBalancedAllocation(
        parse_resources(args.get("resources"), "NodeResourcesBalancedAllocationArgs.resources")
    )
