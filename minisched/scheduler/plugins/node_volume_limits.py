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

from minisched.scheduler.framework import batch
from minisched.scheduler.framework.cycle_state import CycleState
from minisched.scheduler.framework.interface import FilterResult, Handle, PreFilterResult
from minisched.scheduler.framework.status import Code, Status
from minisched.scheduler.framework.types import PodInfo
from minisched.scheduler.plugins.storage import StorageLister, claim_class, claim_volumes, storage_from
from minisched.scheduler.snapshot import NodeTable

NAME = "NodeVolumeLimits"
REASON = "node(s) exceed max volume count"
_STATE_KEY = "PreFilter" + NAME

Object = dict[str, Any]


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

    def sign_pod(self, pod: PodInfo) -> tuple[Sequence[batch.Fragment], Status]:
        """kube's CSILimits.SignPod."""
        return [(batch.VOLUMES, batch.volumes_signer(pod))], Status.success()

    def __init__(self, storage: StorageLister) -> None:
        self.storage = storage

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable) -> tuple[PreFilterResult | None, Status]:
        # (kube has no PreFilter here; this one skips pods without claims and reads the claims once;
        # a missing claim fails in Filter, on every node, as kube's does)
        state.write(_STATE_KEY, attachable(pod.pod, pod.namespace, self.storage, new_pod=True))
        return None, Status.success() if any(True for _ in claim_volumes(pod.pod)) else Status.skip(NAME)

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
