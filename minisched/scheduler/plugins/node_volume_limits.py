"""NodeVolumeLimits (Filter): a node whose CSINode publishes how many volumes a CSI driver may attach
there (spec.drivers[].allocatable.count) takes a pod only while the unique volumes of that driver,
the pod's new ones plus those of the pods already on the node, stay within the count: "node(s)
exceed max volume count" (kube's CSILimits).

A claim's driver comes from its bound PersistentVolume's csi source, else from its StorageClass's
provisioner (a volume still to be provisioned counts once per claim). A missing claim of the new pod
fails the node UnschedulableAndUnresolvable with kube's message; an existing pod's missing claim is
not counted. Left out: in-tree volumes migrated to CSI, VolumeAttachment objects, and the
CSIDriver check behind the VolumeLimitScaling feature gate (off by default)."""

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
    CSI_NODE_ADD,
    CSI_NODE_UPDATE,
    PVC_ADD,
    StorageLister,
    claim_class,
    claim_volumes,
    has_claims,
    name_of,
    namespace_of,
    storage_from,
)
from minisched.scheduler.snapshot import NodeTable

NAME = "NodeVolumeLimits"
REASON = "node(s) exceed max volume count"
_STATE_KEY = "PreFilter" + NAME

Object = dict[str, Any]
# csi-translation-lib's in-tree plugins whose inline volumes migrate to CSI (IsInlineMigratable)
INLINE_MIGRATABLE = ("gcePersistentDisk", "awsElasticBlockStore", "cinder", "azureDisk", "azureFile",
                     "vsphereVolume", "portworxVolume")


def limits(csi_node: Object | None) -> dict[str, int]:
    """getVolumeLimits: driver -> how many of its volumes the node can attach."""
    out: dict[str, int] = {}
    for d in ((csi_node or {}).get("spec") or {}).get("drivers") or []:
        count = (d.get("allocatable") or {}).get("count")
        if count is not None:
            out[str(d.get("name"))] = int(count)
    return out


def attachable(pod: Object, namespace: str, storage: StorageLister, *, new_pod: bool) -> tuple[dict[str, str], str]:
    """filterAttachableVolumes: unique volume name -> CSI driver for the pod's claims; for a new
    pod, ('', message) when a claim is missing."""
    out: dict[str, str] = {}
    for name, _ in claim_volumes(pod):
        if not name:
            if new_pod:
                return {}, "PersistentVolumeClaim had no name"
            continue
        pvc = storage.claim(namespace, name)
        if pvc is None:
            if new_pod:
                return {}, f'looking up PVC {namespace}/{name}: persistentvolumeclaim "{name}" not found'
            continue
        driver, handle = _driver(pvc, namespace, name, storage)
        if driver and handle:
            out[f"{driver}/{handle}"] = driver
    return out, ""


def _driver(pvc: Object, namespace: str, name: str, storage: StorageLister) -> tuple[str, str]:
    pv_name = str((pvc.get("spec") or {}).get("volumeName") or "")
    pv = storage.volume(pv_name) if pv_name else None
    if pv is not None:
        csi = (pv.get("spec") or {}).get("csi")
        if csi is None:
            return "", ""  # an in-tree volume (CSI migration is left out)
        return str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")
    class_name = claim_class(pvc)  # not bound yet: the class's provisioner will make the volume
    sc = storage.storage_class(class_name) if class_name else None
    if sc is None:
        return "", ""
    return str(sc.get("provisioner") or ""), f"pending-{namespace}/{name}"


def fits(new: Mapping[str, str], existing: Sequence[Mapping[str, str]], node_limits: Mapping[str, int]) -> bool:
    """The pure rule for one node: `new` and `existing` map unique volume -> driver."""
    attached: dict[str, str] = {}
    for volumes in existing:
        attached.update(volumes)
    wanted = {v: d for v, d in new.items() if v not in attached}
    for driver in set(wanted.values()):
        if driver in node_limits:
            used = sum(1 for d in attached.values() if d == driver)
            if used + sum(1 for d in wanted.values() if d == driver) > node_limits[driver]:
                return False
    return True


class NodeVolumeLimits:
    name = NAME
    reads_pods = True
    reads_other_nodes = True  # follows CSINode/PVC/PV objects the node table does not version: no reuse

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[signature.Fragment], Status]:
        """kube's CSILimits.SignPod."""
        return [(signature.VOLUMES, signature.volumes_signer(pod))], Status.success()

    def __init__(self, storage: StorageLister) -> None:
        self.storage = storage

    def events_to_register(self) -> list[ce.ClusterEventWithHint]:
        """kube 1.35's CSILimits registrations: a CSINode added (no hint: any may help), a CSINode
        whose limit for a driver rose, an assigned pod with claims deleted, one of the pod's claims
        added. (kube's VolumeAttachment Delete has no counterpart: minisched watches none.)"""
        return [
            *ce.events(None, CSI_NODE_ADD),
            *ce.events(self.is_schedulable_after_csi_node_updated, CSI_NODE_UPDATE),
            *ce.events(self.is_schedulable_after_pod_deleted, ce.ASSIGNED_POD_DELETE),
            *ce.events(self.is_schedulable_after_pvc_added, PVC_ADD),
        ]

    @staticmethod
    def is_schedulable_after_pod_deleted(pod: Object, old: Object | None, new: Object | None) -> ce.QueueingHint:
        """kube's isSchedulableAfterPodDeleted: a pod on a node (or nominated to one) that had a claim,
        a generic ephemeral volume or an inline volume kube migrates to CSI gave back an attachment.
        (minisched's Filter counts no migrated volume; the hint answers as kube's all the same.)"""
        assert old is not None
        spec = old.get("spec") or {}
        volumes = spec.get("volumes") or []
        if not volumes:
            return ce.QUEUE_SKIP
        if not spec.get("nodeName") and not (old.get("status") or {}).get("nominatedNodeName"):
            return ce.QUEUE_SKIP
        attached = any(v.get("persistentVolumeClaim") is not None or v.get("ephemeral") is not None
                       or any(v.get(source) is not None for source in INLINE_MIGRATABLE) for v in volumes)
        return ce.QUEUE if attached else ce.QUEUE_SKIP

    @staticmethod
    def is_schedulable_after_pvc_added(pod: Object, old: Object | None, new: Object | None) -> ce.QueueingHint:
        """kube's isSchedulableAfterPVCAdded: a claim of the pod (by name, or of one of its generic
        ephemeral volumes), in its namespace."""
        assert new is not None
        if namespace_of(new) != namespace_of(pod):
            return ce.QUEUE_SKIP
        wanted = name_of(new)
        return ce.QUEUE if any(name == wanted for name, _ in claim_volumes(pod)) else ce.QUEUE_SKIP

    @staticmethod
    def is_schedulable_after_csi_node_updated(pod: Object, old: Object | None, new: Object | None) -> ce.QueueingHint:
        """kube's isSchedulableAfterCSINodeUpdated: some driver's allocatable count rose (a driver
        without a count counts 0)."""
        assert old is not None and new is not None

        def counts(csi_node: Object) -> dict[str, int]:
            return {str(d.get("name")): int((d.get("allocatable") or {}).get("count") or 0)
                    for d in (csi_node.get("spec") or {}).get("drivers") or []}

        before = counts(old)
        rose = any(limit > before.get(driver, 0) for driver, limit in counts(new).items())
        return ce.QUEUE if rose else ce.QUEUE_SKIP

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        # (kube has no PreFilter here; this one skips pods without claims and reads the claims once;
        # a missing claim fails in Filter, on every node, as kube's does)
        if not has_claims(pod):
            return None, Status.skip(NAME)
        state.write(_STATE_KEY, attachable(pod.pod, pod.namespace, self.storage, new_pod=True))
        return None, Status.success()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> FilterResult:
        n = len(nodes)
        try:
            new, missing = state.read(_STATE_KEY)
        except KeyError:  # a filter-only run (preemption's what-ifs): compute what PreFilter would
            new, missing = attachable(pod.pod, pod.namespace, self.storage, new_pod=True)
        if missing:
            return FilterResult.fail_where(np.ones(n, np.bool_), missing, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        drivers = set(new.values())
        failed = np.zeros(n, np.bool_)
        for row in range(n):
            name = nodes.names[row]
            node_limits = limits(self.storage.csi_node(name))
            if not drivers & set(node_limits):
                continue  # only nodes that publish a limit for one of the pod's drivers cost a look
            existing = [attachable(p.pod, p.namespace, self.storage, new_pod=False)[0] for p in nodes.pods_on(name)]
            failed[row] = not fits(new, existing, node_limits)
        if not failed.any():
            return FilterResult.all_pass(n)
        return FilterResult.fail_where(failed, REASON, Code.UNSCHEDULABLE)


def new(args: Mapping[str, Any] | None, handle: Handle | None,
        storage: StorageLister | None = None) -> NodeVolumeLimits:
    return NodeVolumeLimits(storage_from(handle, storage))
