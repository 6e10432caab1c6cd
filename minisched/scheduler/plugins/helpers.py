"""Shared by the plugins: kube's DefaultNormalizeScore, Go's integer division, and the per-node
readings the pure (one node at a time) check functions use."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework.interface import MAX_NODE_SCORE
from minisched.scheduler.framework.types import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    PodInfo,
    is_scalar_resource,
    resource_amount,
)

Object = dict[str, Any]
IntArray = npt.NDArray[np.int64]


def default_normalize_score(scores: IntArray, *, reverse: bool = False, max_priority: int = MAX_NODE_SCORE) -> IntArray:
    """kube's helper.DefaultNormalizeScore: scale so the highest becomes `max_priority` (integer
    division); with `reverse`, the lowest raw score gets the most. All zero: 0 (or max if reverse)."""
    if scores.size == 0:
        return scores
    top = int(scores.max())
    if top <= 0:
        return np.full_like(scores, max_priority) if reverse else scores
    out = max_priority * scores // top
    return max_priority - out if reverse else out


def go_div(a: IntArray, b: IntArray | int) -> IntArray:
    """Go's integer division (truncates towards zero; numpy's // floors)."""
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) ^ (np.asarray(b) < 0), -q, q)


def take(a: np.ndarray, rows: npt.NDArray[np.intp], n: int) -> np.ndarray:
    """`a[rows]`, without the copy when `rows` is every row (the framework passes them in order)."""
    return a if len(rows) == n else a[rows]


# ---- per-node readings for the pure check functions (no NodeTable involved) ----
def node_name(node: Object) -> str:
    return str((node.get("metadata") or {}).get("name") or "")


def node_labels(node: Object) -> dict[str, str]:
    return {str(k): str(v) for k, v in ((node.get("metadata") or {}).get("labels") or {}).items()}


def node_allocatable(node: Object) -> dict[str, int]:
    status = node.get("status") or {}
    raw: Mapping[str, Any] = status.get("allocatable") or status.get("capacity") or {}
    return {
        r: resource_amount(r, q)
        for r, q in raw.items()
        if r in (CPU, MEMORY, EPHEMERAL_STORAGE, PODS) or is_scalar_resource(r)
    }


def node_taints(node: Object) -> list[tuple[str, str, str]]:
    return [
        (str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in (node.get("spec") or {}).get("taints") or []
    ]


def summed_requests(pods: Iterable[PodInfo]) -> dict[str, int]:
    """What the pods on a node request in total; "pods" counts them."""
    total: dict[str, int] = {PODS: 0}
    for p in pods:
        for r, v in p.requests.items():
            total[r] = total.get(r, 0) + v
        total[PODS] += 1
    return total


def summed_nonzero(pods: Iterable[PodInfo]) -> tuple[int, int]:
    cpu = mem = 0
    for p in pods:
        cpu += p.nonzero_cpu
        mem += p.nonzero_memory
    return cpu, mem


# ---- for queueing hints: the pod they are asked about, parsed once per version --------------------

_PARSED: dict[tuple[str, str, str], PodInfo | None] = {}
_PARSED_MAX = 16384  # parked pods asked about per event; the oldest parse goes first


def parsed_pod(pod: Object) -> PodInfo | None:
    """`pod` parsed (None when it cannot be). A queueing hint is asked for every parked pod on every
    event, so the parse is kept per (uid, name, resourceVersion); a pod that changes is a new key."""
    meta = pod.get("metadata") or {}
    key = (str(meta.get("uid") or ""), f"{meta.get('namespace')}/{meta.get('name')}", str(meta.get("resourceVersion") or ""))
    if not key[2]:  # an object not from the API (tests, notebooks): no version to key on
        return _parse(pod)
    if key in _PARSED:
        return _PARSED[key]
    if len(_PARSED) >= _PARSED_MAX:
        try:  # two schedulers' queues may evict at once (tests run several in a process)
            del _PARSED[next(iter(_PARSED))]
        except (KeyError, RuntimeError, StopIteration):
            _PARSED.clear()
    _PARSED[key] = info = _parse(pod)
    return info


def _parse(pod: Object) -> PodInfo | None:
    from minisched.scheduler.framework.types import PodSpecError

    try:
        return PodInfo.from_pod(pod)
    except PodSpecError:
        return None


def assigned_node(pod: Object | None) -> str:
    """spec.nodeName of a pod object ("" for none)."""
    return str(((pod or {}).get("spec") or {}).get("nodeName") or "")
