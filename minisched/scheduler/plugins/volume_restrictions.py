"""VolumeRestrictions (PreFilter, Filter): volumes that cannot be shared.

As kube's plugin: an inline GCE PD, AWS EBS, iSCSI or RBD volume conflicts with the same disk used by
a pod already on the node (unless both mount it read-only; EBS always conflicts): "node(s) had no
available disk". A claim with the ReadWriteOncePod access mode that any scheduled pod already uses
fails every node: "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access
mode already in-use by another pod" (Unschedulable: preempting that pod may help). A missing claim
stops the pod in PreFilter with the lister's message."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from minisched.scheduler.framework import cluster_event as ce
from minisched.scheduler.framework import signature
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import FilterResult, Handle, PreFilterResult
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.storage import (
    PVC_ADD,
    StorageLister,
    has_claims,
    name_of,
    namespace_of,
    not_found,
    storage_from,
)
from minisched.scheduler.snapshot import NodeTable

NAME = "VolumeRestrictions"
DISK_CONFLICT = "node(s) had no available disk"
RWOP_CONFLICT = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already "
                 "in-use by another pod")
_STATE_KEY = "PreFilter" + NAME
_RESTRICTED = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")

Object = dict[str, Any]


def _volumes(pod: Object) -> list[Object]:
    return list((pod.get("spec") or {}).get("volumes") or [])


def needs_check(volume: Object) -> bool:
    return any(volume.get(kind) is not None for kind in _RESTRICTED)


def volume_conflict(volume: Object, other: Object) -> bool:
    """isVolumeConflict: does `volume` of the new pod clash with any volume of pod `other`?"""
    for existing in _volumes(other):
        a, b = volume.get("gcePersistentDisk"), existing.get("gcePersistentDisk")
        if a is not None and b is not None and a.get("pdName") == b.get("pdName") and not (
                a.get("readOnly") and b.get("readOnly")):
            return True
        a, b = volume.get("awsElasticBlockStore"), existing.get("awsElasticBlockStore")
        if a is not None and b is not None and a.get("volumeID") == b.get("volumeID"):
            return True
        a, b = volume.get("iscsi"), existing.get("iscsi")
        if a is not None and b is not None and a.get("iqn") == b.get("iqn") and not (
                a.get("readOnly") and b.get("readOnly")):
            return True
        a, b = volume.get("rbd"), existing.get("rbd")
        if (a is not None and b is not None and set(a.get("monitors") or []) & set(b.get("monitors") or [])
                and a.get("pool", "rbd") == b.get("pool", "rbd") and a.get("image") == b.get("image")
                and not (a.get("readOnly") and b.get("readOnly"))):
            return True
    return False


def disk_fits(pod: Object, node_pods: Sequence[PodInfo]) -> bool:
    """The pure inline-disk rule for one node, given the pods already on it."""
    return not any(volume_conflict(v, p.pod) for v in _volumes(pod) if needs_check(v) for p in node_pods)


def read_write_once_pod_claims(pod: Object, namespace: str, storage: StorageLister) -> tuple[frozenset[str], str]:
    """The pod's claims with the ReadWriteOncePod access mode, or ('', the NotFound message)."""
    names = set()
    for v in _volumes(pod):
        if v.get("persistentVolumeClaim") is None:
            continue
        name = str(v["persistentVolumeClaim"].get("claimName") or "")
        pvc = storage.claim(namespace, name)
        if pvc is None:
            return frozenset(), not_found("persistentvolumeclaim", name)
        if "ReadWriteOncePod" in ((pvc.get("spec") or {}).get("accessModes") or []):
            names.add(name)
    return frozenset(names), ""


def uses_claim(p: PodInfo, namespace: str, claims: frozenset[str]) -> bool:
    if p.namespace != namespace:
        return False
    return any((v.get("persistentVolumeClaim") or {}).get("claimName") in claims for v in _volumes(p.pod))


class VolumeRestrictions:
    name = NAME
    reads_pods = True
    reads_other_nodes = True  # a ReadWriteOncePod claim in use anywhere fails every node: no reuse

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[signature.Fragment], Status]:
        return [(signature.VOLUMES, signature.volumes_signer(pod))], Status.success()

    def __init__(self, storage: StorageLister) -> None:
        self.storage = storage

    def events_to_register(self) -> list[ce.ClusterEventWithHint]:
        """kube 1.35's, with queueing hints on: an assigned pod deleted (its disks or claims freed),
        a node added, one of the pod's claims created (its access modes are read)."""
        return [
            *ce.events(self.is_schedulable_after_pod_deleted, ce.ASSIGNED_POD_DELETE),
            *ce.events(None, ce.NODE_ADD),
            *ce.events(self.is_schedulable_after_persistent_volume_claim_added, PVC_ADD),
        ]

    @staticmethod
    def is_schedulable_after_persistent_volume_claim_added(pod: Object, old: Object | None,
                                                           new: Object | None) -> ce.QueueingHint:
        """kube's isSchedulableAfterPersistentVolumeClaimAdded: a claim the pod names, in its namespace
        (not a generic ephemeral volume's: kube reads persistentVolumeClaim volumes only here)."""
        assert new is not None
        if namespace_of(new) != namespace_of(pod):
            return ce.QUEUE_SKIP
        wanted = name_of(new)
        named = any((v.get("persistentVolumeClaim") or {}).get("claimName") == wanted
                    for v in _volumes(pod) if v.get("persistentVolumeClaim") is not None)
        return ce.QUEUE if named else ce.QUEUE_SKIP

    @staticmethod
    def is_schedulable_after_pod_deleted(pod: Object, old: Object | None, new: Object | None) -> ce.QueueingHint:
        """kube's isSchedulableAfterPodDeleted: a pod of the same namespace whose inline disk clashed
        with the pod's, or that used one of its claims (the claim may be ReadWriteOncePod: kube does
        not read the claim here, to keep the hint cheap)."""
        assert old is not None
        if namespace_of(old) != namespace_of(pod):
            return ce.QUEUE_SKIP
        if any(volume_conflict(v, old) for v in _volumes(pod) if needs_check(v)):
            return ce.QUEUE
        claims = {(v.get("persistentVolumeClaim") or {}).get("claimName")
                  for v in _volumes(pod) if v.get("persistentVolumeClaim") is not None}
        shared = any((v.get("persistentVolumeClaim") or {}).get("claimName") in claims
                     for v in _volumes(old) if v.get("persistentVolumeClaim") is not None)
        return ce.QUEUE if shared else ce.QUEUE_SKIP

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        claims, missing = (read_write_once_pod_claims(pod.pod, pod.namespace, self.storage) if has_claims(pod)
                           else (frozenset(), ""))
        if missing:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (missing,), NAME)
        if not claims and not any(needs_check(v) for v in _volumes(pod.pod)):
            return None, Status.skip(NAME)
        state.write(_STATE_KEY, claims)
        return None, Status.success()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        n = len(nodes)
        try:
            claims: frozenset[str] = state.read(_STATE_KEY)
        except KeyError:  # a filter-only run (preemption's what-ifs): compute what PreFilter would
            claims, missing = read_write_once_pod_claims(pod.pod, pod.namespace, self.storage)
            if missing:
                return FilterResult.fail_where(np.ones(n, np.bool_), missing, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        restricted = [v for v in _volumes(pod.pod) if needs_check(v)]
        disk = np.zeros(n, np.bool_)
        if restricted:
            disk = nodes.count_pods(lambda p: any(volume_conflict(v, p.pod) for v in restricted)) > 0
        rwop = np.zeros(n, np.bool_)
        if claims and nodes.count_pods(lambda p: uses_claim(p, pod.namespace, claims)).sum() > 0:
            rwop[~disk] = True  # Filter returns the disk conflict first
        if not disk.any() and not rwop.any():
            return FilterResult.all_pass(n)
        reasons = disk.astype(np.int64) | (rwop.astype(np.int64) << 1)
        return FilterResult(reasons == 0, reasons, (DISK_CONFLICT, RWOP_CONFLICT), Code.UNSCHEDULABLE)


def new(args: Mapping[str, Any] | None, handle: Handle | None,
        storage: StorageLister | None = None) -> VolumeRestrictions:
    return VolumeRestrictions(storage_from(handle, storage))
