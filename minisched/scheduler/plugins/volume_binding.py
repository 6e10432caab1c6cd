"""VolumeBinding (PreFilter, Filter): a pod's PersistentVolumeClaims must exist and be bound, and
each bound claim's PersistentVolume must allow the node (its required node affinity).

As kube's plugin: a missing claim, a lost one or one being deleted makes the pod unschedulable
everywhere (UnschedulableAndUnresolvable, the lister's message); an unbound claim whose class binds
Immediately (or a claim pre-bound to a volume the PV controller has not confirmed) waits for the PV
controller ("pod has unbound immediate PersistentVolumeClaims"); a node outside a bound volume's node
affinity fails with "node(s) didn't match PersistentVolume's node affinity", and a claim bound to a
volume that does not exist fails every node with kube's "non-existent pv(s)" reason.

Left out, on purpose: a claim whose class is WaitForFirstConsumer is NOT bound or provisioned here
(kube's scheduler assumes a matching PV or asks the provisioner in PreBind). minisched refuses such
a pod with a message that says so, instead of placing it where no volume may follow.
Also left out: storage capacity checks and scoring, in-tree to CSI translation of PVs, and the check
that an ephemeral volume's claim is owned by the pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from minisched.scheduler.framework import batch
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import FilterResult, Handle, PreFilterResult
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import (
    NodeSelectorTerm,
    PodInfo,
    PodSpecError,
    parse_node_selector_term,
)
from minisched.scheduler.plugins.node_affinity import requirement_mask
from minisched.scheduler.plugins.storage import (
    WAIT_FOR_FIRST_CONSUMER,
    StorageLister,
    claim_class,
    claim_volumes,
    fully_bound,
    not_found,
    storage_from,
)
from minisched.scheduler.snapshot import NodeTable

NAME = "VolumeBinding"
NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
_STATE_KEY = "PreFilter" + NAME

Object = dict[str, Any]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class _Claims:
    """What PreFilter found: the PersistentVolume (or None: missing) of each bound claim, in order."""

    volumes: tuple[tuple[str, Object | None], ...]


def wait_for_first_consumer_message(claim: str) -> str:
    return (f'persistentvolumeclaim "{claim}" uses a WaitForFirstConsumer StorageClass: minisched does not '
            "bind or provision volumes at scheduling time, so it does not place this pod")


def classify(pod: Object, namespace: str, storage: StorageLister) -> tuple[_Claims | None, Status]:
    """podHasPVCs + GetPodVolumeClaims: the bound claims' volumes, or why the pod cannot go anywhere."""
    bound: list[tuple[str, Object | None]] = []
    found_any = False
    waiting: list[str] = []
    immediate = False
    for name, ephemeral in claim_volumes(pod):
        found_any = True
        pvc = storage.claim(namespace, name)
        if pvc is None:
            why = (f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
                   if ephemeral else not_found("persistentvolumeclaim", name))
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (why,), NAME)
        volume_name = str((pvc.get("spec") or {}).get("volumeName") or "")
        if (pvc.get("status") or {}).get("phase") == "Lost":
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (
                f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume "{volume_name}"',), NAME)
        if (pvc.get("metadata") or {}).get("deletionTimestamp"):
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (
                f'persistentvolumeclaim "{name}" is being deleted',), NAME)
        if fully_bound(pvc):
            bound.append((volume_name, storage.volume(volume_name)))
            continue
        class_name = claim_class(pvc)
        sc = storage.storage_class(class_name) if class_name else None
        delayed = sc is not None and sc.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER
        if delayed and not volume_name:
            waiting.append(name)
        else:
            immediate = True
    if not found_any:
        return None, Status.skip(NAME)
    if immediate:
        return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (UNBOUND_IMMEDIATE,), NAME)
    if waiting:
        return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (wait_for_first_consumer_message(waiting[0]),), NAME)
    return _Claims(tuple(bound)), Status.success()


def volume_terms(pv: Object) -> tuple[NodeSelectorTerm, ...] | None:
    """The required node affinity of a PersistentVolume (None: any node will do)."""
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    if required is None:
        return None
    terms = required.get("nodeSelectorTerms") or []
    name = pv["metadata"]["name"]
    return tuple(parse_node_selector_term(t, f"persistentvolume {name}: spec.nodeAffinity.required."
                                             f"nodeSelectorTerms[{i}]") for i, t in enumerate(terms))


def _fields_match_no_name(term: NodeSelectorTerm) -> bool:
    # volume.CheckNodeAffinity matches a node built from labels alone: its name is ""
    return all(r.matches({r.key: ""}) for r in term.fields)


def node_matches(pv: Object, labels: Mapping[str, str]) -> bool:
    """The pure rule for one node (volume.CheckNodeAffinity)."""
    terms = volume_terms(pv)
    if terms is None:
        return True
    return any(not t.is_empty and all(r.matches(labels) for r in t.expressions) and _fields_match_no_name(t)
               for t in terms)


def node_mask(pv: Object, nodes: NodeTable) -> BoolArray:
    terms = volume_terms(pv)
    n = len(nodes)
    if terms is None:
        return np.ones(n, np.bool_)
    mask = np.zeros(n, np.bool_)
    for t in terms:
        if t.is_empty or not _fields_match_no_name(t):
            continue
        term = np.ones(n, np.bool_)
        for r in t.expressions:
            term &= requirement_mask(nodes, r)
        mask |= term
    return mask


def fits(claims: _Claims, labels: Mapping[str, str]) -> tuple[str, ...]:
    """checkBoundClaims for one node: () if it fits, else its one reason."""
    for _, pv in claims.volumes:
        if pv is None:
            return (PV_NOT_EXIST,)
        if not node_matches(pv, labels):
            return (NODE_CONFLICT,)
    return ()


class VolumeBinding:
    name = NAME
    reads_pods = False
    # Verdicts follow PVC/PV objects the node table does not version: never reuse them.
    reads_other_nodes = True

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[batch.Fragment], Status]:
        return [(batch.VOLUMES, batch.volumes_signer(pod))], Status.success()

    def __init__(self, storage: StorageLister) -> None:
        self.storage = storage

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        claims, status = classify(pod.pod, pod.namespace, self.storage)
        if claims is not None:
            state.write(_STATE_KEY, claims)
        return None, status

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        n = len(nodes)
        try:
            claims: _Claims = state.read(_STATE_KEY)
        except KeyError:  # a filter-only run (preemption's what-ifs): PreFilter's verdict again
            found, status = classify(pod.pod, pod.namespace, self.storage)
            if found is None:
                return _everywhere(status, n)
            claims = found
        undecided = np.ones(n, np.bool_)
        reasons = np.zeros(n, np.uint8)
        for _, pv in claims.volumes:
            if pv is None:  # fails every node still undecided, as checkBoundClaims returns there
                reasons[undecided] = 2
                undecided[:] = False
                break
            try:
                conflict = undecided & ~node_mask(pv, nodes)
            except PodSpecError as e:
                raise ValueError(str(e)) from None
            reasons[conflict] = 1
            undecided &= ~conflict
        if not reasons.any():
            return FilterResult.all_pass(n)
        return FilterResult(reasons == 0, reasons.astype(np.int64), (NODE_CONFLICT, PV_NOT_EXIST),
                            Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def _everywhere(status: Status, n: int) -> FilterResult:
    """A PreFilter status as a filter result: every row passes (skip) or fails for its reasons."""
    if status.is_success or status.is_skip:
        return FilterResult.all_pass(n)
    return FilterResult.fail_where(np.ones(n, np.bool_), status.message(), status.code)


def new(args: Mapping[str, Any] | None, handle: Handle | None, storage: StorageLister | None = None) -> VolumeBinding:
    return VolumeBinding(storage_from(handle, storage))
