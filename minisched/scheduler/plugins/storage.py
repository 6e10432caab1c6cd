"""What the volume plugins read besides nodes and pods: PersistentVolumeClaims, PersistentVolumes,
StorageClasses and CSINodes, through the Handle's `storage` lister (kube's listers from the shared
informer factory; `InformerStorage` over the scheduler's informers, `StaticStorage` of given
objects for tests and notebooks, both in framework/listers.py). Also here: the claim helpers the
volume plugins share (kube's storage helpers).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from minisched.resources import CSI_NODES, PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES
from minisched.scheduler.framework.cluster_event import ClusterEvent
from minisched.scheduler.framework.interface import Handle
from minisched.scheduler.framework.listers import InformerStorage, StaticStorage, StorageLister
from minisched.scheduler.framework.types import PodInfo
from minisched.volumes import (
    BETA_CLASS_ANNOTATION,
    BIND_COMPLETED,
    WAIT_FOR_FIRST_CONSUMER,
    claim_class,
    fully_bound,
)

Object = dict[str, Any]

__all__ = ("BETA_CLASS_ANNOTATION", "BIND_COMPLETED", "STORAGE_RESOURCES", "WAIT_FOR_FIRST_CONSUMER", "InformerStorage",
           "StaticStorage", "StorageLister", "claim_class", "claim_volumes", "fully_bound", "name_of", "namespace_of", "not_found",
           "storage_from")
STORAGE_RESOURCES = (PERSISTENT_VOLUME_CLAIMS, PERSISTENT_VOLUMES, STORAGE_CLASSES, CSI_NODES)

# The storage events the scheduler sends (named after the object's kind, as kube's fwk.PersistentVolumeClaim
# etc.), for the volume plugins' registrations. minisched watches no CSIDriver, CSIStorageCapacity or
# VolumeAttachment objects, so kube's registrations for those have no counterpart.
PVC_ADD, PVC_UPDATE = ClusterEvent("PersistentVolumeClaim", "Add"), ClusterEvent("PersistentVolumeClaim", "Update")
PV_ADD, PV_UPDATE = ClusterEvent("PersistentVolume", "Add"), ClusterEvent("PersistentVolume", "Update")
STORAGE_CLASS_ADD, STORAGE_CLASS_UPDATE = ClusterEvent("StorageClass", "Add"), ClusterEvent("StorageClass", "Update")
CSI_NODE_ADD, CSI_NODE_UPDATE = ClusterEvent("CSINode", "Add"), ClusterEvent("CSINode", "Update")


def storage_from(handle: Handle | None, storage: StorageLister | None = None) -> StorageLister:
    """The lister a volume plugin uses: the one given (tests), else its handle's, else an empty one
    (a plugin built with no handle)."""
    if storage is not None:
        return storage
    return handle.storage if handle is not None else StaticStorage()


def claim_volumes(pod: Object) -> Iterator[tuple[str, bool]]:
    """(claim name, is ephemeral) for each volume of `pod` backed by a PersistentVolumeClaim; a
    generic ephemeral volume's claim is named <pod>-<volume> (ephemeral.VolumeClaimName)."""
    spec = pod.get("spec") or {}
    pod_name = (pod.get("metadata") or {}).get("name") or ""
    for v in spec.get("volumes") or []:
        if v.get("persistentVolumeClaim") is not None:
            yield str(v["persistentVolumeClaim"].get("claimName") or ""), False
        elif v.get("ephemeral") is not None:
            yield f"{pod_name}-{v.get('name') or ''}", True


def has_claims(pod: PodInfo) -> bool:
    """Has the pod a volume backed by a claim (claim_volumes)? Four volume plugins ask in PreFilter
    every cycle, and most pods have none (the service account token volume is projected); kept on
    the PodInfo, which never changes."""
    found = pod.memo.get("has_claims")
    if found is None:
        found = pod.memo["has_claims"] = any(True for _ in claim_volumes(pod.pod))
    return bool(found)


def namespace_of(obj: Object) -> str:
    """A namespaced object's namespace, as the hints compare them (an unset one is "default")."""
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def name_of(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def not_found(kind: str, name: str) -> str:
    """A lister's NotFound error text ("persistentvolumeclaim \"x\" not found")."""
    return f'{kind} "{name}" not found'
